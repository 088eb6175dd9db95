// Model families: one entry each, declared in the family's folder (esm2/family.cpp,
// llama/family.cpp) and listed once in registry.cpp. Everything outside models/ that needs
// to know about a family — which config keys it accepts, how to build or load it, which
// tokenizer and batches it trains on, which commands it supports — asks its entry; nothing
// else compares family names. docs/ARCHITECTURE.md walks through adding a family.
#pragma once
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "biofm/data/batch_source.h"
#include "biofm/data/tokenizer.h"
#include "biofm/models/language_model.h"
#include "biofm/models/model_config.h"

namespace biofm {

enum class Objective { MaskedLM, CausalLM };

// What building a model takes besides its shape.
struct BuildOptions {
  Precision precision = Precision::F32;
  uint64_t seed = 42;                          // random init
  bool no_decay_on_1d_and_embeddings = false;  // optimizer grouping fixed in the parameter table
  ParamShard shard;                            // fsdp: build only this rank's part of the parameters
};

struct ModelFamily {
  std::string name;           // model.family in configs ("esm2")
  std::string hf_model_type;  // model_type in config.json ("esm")
  Objective objective = Objective::MaskedLM;
  bool embed = false, eval = false, generate = false;  // commands it supports

  // The family's rules on model.config and the dataset keys it reads; appends one message
  // per violation, naming the keys.
  void (*check_config)(const ModelShape& shape, const DataOptions& data, std::vector<std::string>& errors) = nullptr;
  // A randomly initialised model of the shape.
  std::unique_ptr<LanguageModel> (*build)(const ModelShape& shape, Device device, const BuildOptions& o) = nullptr;
  // A Hugging Face directory of this family (config.json model_type == hf_model_type).
  std::unique_ptr<LanguageModel> (*load)(const std::string& dir, Device device, const BuildOptions& o) = nullptr;
  // The architecture that directory's config.json sets, written over the keys of `shape` that
  // the family reads (the others are left as they are): what `load` would build.
  void (*read_shape)(const std::string& dir, ModelShape& shape) = nullptr;
  const Tokenizer& (*tokenizer)() = nullptr;
  // The training / evaluation batches (data and the tokenizer must outlive the source).
  std::unique_ptr<BatchSource> (*batches)(const DataOptions& o, const SequenceCorpus& data) = nullptr;
};

// For check_config: appends one message made of `parts`.
template <class... A>
void config_error(std::vector<std::string>& errors, const A&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  errors.push_back(os.str());
}

const std::vector<const ModelFamily*>& model_families();
std::vector<std::string> family_names();
// By model.family; an unknown name throws, listing the known ones.
const ModelFamily& family_named(const std::string& name);
// By a Hugging Face directory's config.json model_type; throws when none matches.
const ModelFamily& family_of_dir(const std::string& dir);
std::string model_type_of_dir(const std::string& dir);

// A Hugging Face directory of any registered family.
std::unique_ptr<LanguageModel> load_model_dir(const std::string& dir, Device device,
                                              Precision precision = Precision::F32);

}  // namespace biofm
