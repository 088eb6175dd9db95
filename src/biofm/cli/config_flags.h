// The config overrides of the command line (`biofm train ... key.sub=value`, and bench's): their
// check, and the listing of the keys that `--help` prints, both from the training config schema
// (train/config.h) that parses them.
#pragma once
#include <string>
#include <vector>

namespace biofm {

// Checks the overrides on their own against the schema, before any config file is read: an
// unknown key (with the nearest one), a malformed override, a value of the wrong type, not one
// of an enum's values or outside the key's range throws UsageError (exit 2), every problem
// listed. What only the composed config shows (a config file's mistakes, the cross-key rules)
// is left to loading, a biofm::Error (exit 1).
void check_config_overrides(const std::vector<std::string>& overrides);

// "config keys (key=value overrides):" then each key of the schema, in schema order:
//   "  optimizer.lr  float > 0, default 0.0004" and its help on the next line.
std::string config_keys_help();

}  // namespace biofm
