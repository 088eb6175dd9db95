// How a causal DNA model was trained to score lowercase (soft-masked) bases, recorded in its
// exported config.json for the commands that score with it (eval, score, --track):
// "biofm_uppercase_labels": true when training mapped a/c/g/t targets to A/C/G/T
// (dataset.uppercase_labels), false when it kept them. transformers keeps a config.json key it
// does not know as an attribute of the config, so the directory still loads there.
#pragma once
#include <optional>
#include <string>

namespace biofm {

inline constexpr const char* kUppercaseLabelsKey = "biofm_uppercase_labels";
// Adds the key to dir/config.json (rewritten atomically).
void record_uppercase_labels(const std::string& dir, bool uppercase_labels);
// The key of dir/config.json; none when the directory has no config.json or the key is absent
// (an older export, a Hugging Face model). A value that is not true/false is an error naming the file.
std::optional<bool> recorded_uppercase_labels(const std::string& dir);

}  // namespace biofm
