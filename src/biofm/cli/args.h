// A small command-line parser for the subcommands: --flag value, --flag=value, boolean
// --flag, and positional key=value overrides. Unknown flags fail naming the nearest one.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "biofm/core/dtype.h"
#include "biofm/data/reader.h"
#include "biofm/models/registry.h"

namespace biofm {

// Upper bound for token-count flags (--max-seq-length, --max-tokens, ...): far above any real
// use, low enough that buffers sized from it cannot overflow.
constexpr long long kMaxFlagTokens = 1LL << 26;

class Args {
 public:
  // value_flags take a value; bool_flags do not.
  Args(int argc, char** argv, int first, const std::set<std::string>& value_flags,
       const std::set<std::string>& bool_flags, const std::string& command);
  bool has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  std::string require(const std::string& flag) const;
  long long get_int(const std::string& flag, long long fallback) const;
  // An integer in [lo, hi] (a given value outside fails naming the flag and the range).
  long long get_int(const std::string& flag, long long fallback, long long lo, long long hi) const;
  // A finite number in [lo, hi].
  double get_double(const std::string& flag, double fallback, double lo, double hi) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
  std::string command_;
};

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

// --device cpu|cuda (cuda only when a GPU is usable).
Device parse_device(const std::string& s);
// family.load(dir, dev) with an allocation failure (a config.json whose sizes pass the
// limits but do not fit in memory) reported as a biofm::Error naming the directory.
std::unique_ptr<LanguageModel> load_model(const ModelFamily& family, const std::string& dir, Device dev);
// --format and --column, for commands that read sequence files.
ReaderOptions reader_options(const Args& a);

}  // namespace biofm
