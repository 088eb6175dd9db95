// Hugging Face model directories: config.json plus the weights, read and written for any
// family. A family says how its parameter names map onto what transformers writes (the
// prefix a bare base model lacks, and names that are not parameters); everything else —
// which files hold the weights, tensor dtypes, legacy names — is handled here.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "biofm/models/params.h"

namespace biofm {

// A Hugging Face model directory's config.json (read) and its weight files, or an error that
// says what is missing and how to convert what is there.
struct HfDirContents {
  std::string dir, config_path, config_json;
  std::vector<std::string> weight_files;  // model.safetensors, or the shards of an index
};
HfDirContents read_hf_dir(const std::string& dir);

// How a family's parameter table names relate to a checkpoint's names.
struct HfNaming {
  // The LM's base-model prefix ("esm.", "model."): a bare base-model checkpoint lacks it, so
  // names that start neither with it nor with "lm_head." get it added.
  std::string prefix;
  // Names a checkpoint may hold that are not parameters of the table (rotary buffers, the
  // ESM contact head, a tied decoder's copy); they are skipped.
  std::function<bool(const std::string&)> ignorable;
};

// Loads every parameter of `store` from the directory's weights; an unknown name, a missing
// parameter or a wrong shape throws, naming the tensor and the file.
void load_hf_weights(ParamStore& store, const HfDirContents& hf, const HfNaming& naming);
// Writes dir/model.safetensors: every parameter in fp32 under its Hugging Face name.
void save_hf_weights(const ParamStore& store, const std::string& dir);

}  // namespace biofm
