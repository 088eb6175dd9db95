// Command flags declared once: the same table parses argv and prints `--help`, and the same
// table of commands (commands.h) lists them in `biofm --help`.
//
//   const CommandSpec kSpec{.name = "report", .synopsis = "RUN_DIR [RUN_DIR ...] [--output report.html]",
//                           .summary = "one HTML page of a run's curves",
//                           .flags = {{"--output", "FILE", "where to write the page (default: report.html)"}}};
//   Flags f = parse_flags(kSpec, argc, argv);   // throws UsageError; --help is always known
//   if (f.help()) { print_help(kSpec); return 0; }
//
// A flag with an empty `value` is boolean. Anything not starting with "-" is positional.
// A `value` of the form "a|b|c" (no spaces) is the list of values the flag takes: parse_flags
// refuses any other, and --help shows them.
//
// Exit codes (main.cpp; README.md, "Exit codes"): whatever is wrong with the command line itself
// is a UsageError, exit 2: an unknown flag, a missing value or required flag, a value that does
// not parse, is not one of the flag's values or lies outside its range, flags that exclude each
// other, and config overrides (key=value) with an unknown key or a bad value. Flags's accessors
// below and the flag value parsers (model_flags.h, config_flags.h) throw it. What goes wrong
// while doing the work is a biofm::Error, exit 1: missing or malformed inputs, a config file's
// mistakes and the resolved config's cross-key rules, a flag value the model or the machine
// cannot honour (a layer the model lacks, --device cuda without a GPU).
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "biofm/core/error.h"

namespace biofm {

namespace config {
class Schema;  // io/config.h
}

// Upper bound for token-count flags (--max-seq-length, --max-tokens, ...): far above any real
// use, low enough that buffers sized from it cannot overflow.
constexpr long long kMaxFlagTokens = 1LL << 26;

// A mistake in how the command was called (main exits with 2; runtime errors exit with 1).
// main prefixes the message with "biofm COMMAND: " where it does not start with that already.
struct UsageError : Error {
  using Error::Error;
};

template <class... Parts>
[[noreturn]] void usage_fail(const Parts&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  throw UsageError(os.str());
}

struct FlagSpec {
  std::string name;   // "--output"
  std::string value;  // metavariable ("FILE"); "" = boolean flag
  std::string help;
  bool hidden = false;  // parsed, but left out of --help and of "did you mean"
};

struct CommandSpec {
  std::string name;      // "train"
  std::string synopsis;  // shown after "usage: biofm NAME "
  std::string summary;   // one line: listed by `biofm --help`, and under the usage line
  std::vector<FlagSpec> flags = {};
  // The first positional argument (or whatever follows "--") and everything after it are
  // positional, unparsed: `biofm launch ... COMMAND ARGS` passes the command's own flags on.
  bool flags_end_at_positional = false;
  std::string details = {};              // more lines under the summary in --help
  std::string (*help_tail)() = nullptr;  // appended to --help after the options (train: config keys)
  // train, bench: the schema of their `key=value` positionals (a `--key=value` is named so)
  const config::Schema& (*config_schema)() = nullptr;
};

// The values "a|b|c" of a flag's metavariable; empty when it is not such a list.
std::vector<std::string> flag_choices(const FlagSpec& f);

class Flags {
 public:
  bool help() const { return has("--help"); }
  bool has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  std::string require(const std::string& flag) const;  // UsageError when absent
  long long get_int(const std::string& flag, long long fallback) const;
  // An integer in [lo, hi]: one outside is a UsageError naming the flag and the range (the
  // fallback is not checked).
  long long get_int(const std::string& flag, long long fallback, long long lo, long long hi) const;
  // A finite number in [lo, hi] (UsageError otherwise).
  double get_double(const std::string& flag, double fallback, double lo, double hi) const;
  // UsageError "biofm COMMAND: " + the pieces, for flag combinations the command refuses.
  template <class... Parts>
  [[noreturn]] void fail_usage(const Parts&... parts) const {
    usage_fail("biofm ", command_, ": ", parts...);
  }
  const std::vector<std::string>& positional() const { return positional_; }
  // UsageError naming the first positional argument, for commands that take none.
  void expect_no_positional() const;

 private:
  friend Flags parse_flags(const CommandSpec&, int, char**, int);
  std::string command_;
  std::set<std::string> known_;
  std::map<std::string, std::string> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
};

// Parses argv[first..argc) against spec (default first = 2: after "biofm CMD").
Flags parse_flags(const CommandSpec& spec, int argc, char** argv, int first = 2);
// "usage: biofm NAME SYNOPSIS", the summary and details, one line per flag (with --help), then
// help_tail's text.
std::string help_text(const CommandSpec& spec);
void print_help(const CommandSpec& spec);

}  // namespace biofm
