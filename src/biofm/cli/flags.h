// Command flags declared once: the same table parses argv and prints `--help`.
//
//   const CommandSpec kSpec{"report", "RUN_DIR [RUN_DIR ...] [--output report.html]",
//                           "one HTML page of a run's curves",
//                           {{"--output", "FILE", "where to write the page (default: report.html)"}}};
//   Flags f = parse_flags(kSpec, argc, argv);   // throws UsageError; --help is always known
//   if (f.help()) { print_help(kSpec); return 0; }
//
// A flag with an empty `value` is boolean. Anything not starting with "-" is positional.
// Bad flags, missing values, values that do not parse and missing required flags throw
// UsageError (exit code 2); a parsed value outside its range is a biofm::Error (exit 1), as
// a config value outside its range is.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "biofm/core/error.h"

namespace biofm {

// Upper bound for token-count flags (--max-seq-length, --max-tokens, ...): far above any real
// use, low enough that buffers sized from it cannot overflow.
constexpr long long kMaxFlagTokens = 1LL << 26;

// A mistake in how the command was called (main exits with 2; runtime errors exit with 1).
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
  std::string summary;   // one or more lines under the usage line
  std::vector<FlagSpec> flags;
  // The first positional argument (or whatever follows "--") and everything after it are
  // positional, unparsed: `biofm launch ... COMMAND ARGS` passes the command's own flags on.
  bool flags_end_at_positional = false;
};

class Flags {
 public:
  bool help() const { return has("--help"); }
  bool has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  std::string require(const std::string& flag) const;  // UsageError when absent
  long long get_int(const std::string& flag, long long fallback) const;
  // An integer in [lo, hi]: one outside fails naming the flag and the range.
  long long get_int(const std::string& flag, long long fallback, long long lo, long long hi) const;
  // A finite number in [lo, hi].
  double get_double(const std::string& flag, double fallback, double lo, double hi) const;
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
// "usage: biofm NAME SYNOPSIS", the summary, then one line per flag (with --help).
std::string help_text(const CommandSpec& spec);
void print_help(const CommandSpec& spec);

}  // namespace biofm
