// Hugging Face model directories: config.json plus the weights, read and written for any
// family. A family says how its parameter names map onto what transformers writes (the
// prefix a bare base model lacks, and names that are not parameters); everything else is
// handled here, the way transformers' from_pretrained reads a directory:
//  - weights in model.safetensors, or sharded: model.safetensors.index.json, whose weight_map
//    names the shard of each tensor (a missing shard is an error naming it); a directory with
//    only pytorch_model.bin (a pickle) is an error saying how to convert it;
//  - tensors in F32, BF16 or F16, converted into the store's dtype;
//  - legacy LayerNorm names (`gamma` / `beta` for `weight` / `bias`, as transformers still
//    writes for ESM), with or without the base-model prefix;
//  - tensors that are not parameters (ESM's contact head, a bare EsmModel's pooler, rotary
//    `inv_freq` and `position_ids` buffers, whatever the family calls ignorable) are skipped
//    with one note (core/notes.h: on stderr, or to the caller's NoteCapture) saying what was
//    skipped;
//  - a bare base-model checkpoint (no LM head) leaves the `lm_head.*` parameters as they are,
//    with a note.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "biofm/models/params.h"

namespace biofm {

// A Hugging Face model directory's config.json (read) and its weight files, or an error that
// says what is missing and how to convert what is there.
struct HfDirContents {
  std::string dir, config_path, config_json;
  std::vector<std::string> weight_files;  // model.safetensors, or the shards of an index
  std::string index_path;                 // model.safetensors.index.json when sharded, else ""
  std::map<std::string, std::string> weight_map;  // sharded: tensor name → shard path
  // A checkpoint of a fully sharded biofm run: model-rankR-of-W.safetensors, each a flat range
  // of biofm's own parameter layout (train/checkpoint.h), in place of model.safetensors.
  std::vector<std::string> flat_shard_files;
};
HfDirContents read_hf_dir(const std::string& dir);

// How a family's parameter table names relate to a checkpoint's names.
struct HfNaming {
  // The LM's base-model prefix ("esm.", "model."): a bare base-model checkpoint lacks it, so
  // names that start neither with it nor with "lm_head." get it added.
  std::string prefix;
  // Names a checkpoint may hold that are not parameters of the table (rotary buffers, the
  // ESM contact head, a tied decoder's copy); they are skipped. The note calls those that are
  // none of the built-in kinds (contact head, pooler, rotary buffers) tied to the word embeddings.
  std::function<bool(const std::string&)> ignorable;
};

// Loads every parameter of `store` from the directory's weights (memory-mapped, converted
// straight into the store); an unknown name, a missing parameter or a wrong shape throws,
// naming the tensor and the file, before any parameter is written. Returns the parameters the
// directory did not hold (only a bare base model's LM head may be absent): the caller
// initialises them.
// kept (optional): the contact-head tensors (ESM), copied to the host in fp32, for the model
// to carry into its exports (LanguageModel::carry_tensors); not in the note (training notes them
// when it writes its export).
std::vector<size_t> load_hf_weights(ParamStore& store, const HfDirContents& hf, const HfNaming& naming,
                                    std::vector<SafetensorsSource>* kept = nullptr);
// Writes dir/model.safetensors: every parameter in fp32 under its Hugging Face name (streamed),
// then `extra` (tensors carried through from the loaded directory).
void save_hf_weights(const ParamStore& store, const std::string& dir, const std::vector<SafetensorsSource>& extra = {});

}  // namespace biofm
