// ESM-2 masked language model, as Hugging Face `EsmForMaskedLM` computes it:
// embeddings with token dropout → pre-LN transformer layers with rotary, bidirectional
// attention (biases everywhere, exact GELU MLP) → emb_layer_norm_after → LM head (dense,
// GELU, LayerNorm, decoder tied to the embedding + bias).
//
// The forward and backward passes are TransformerLM's; this family is its parameter table,
// Hugging Face names, block recipe and head.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "biofm/models/esm2/config.h"
#include "biofm/models/transformer_lm.h"

namespace biofm {

class Esm2Model : public TransformerLM {
 public:
  Esm2Model(const Esm2Config& config, Device device, Precision precision = Precision::F32, ParamShard shard = {});

  static std::vector<ParamSpec> param_table(const Esm2Config& c);
  static ArchSpec arch(const Esm2Config& c);
  // Reads a Hugging Face directory (config.json + weights). A bare EsmModel has no LM head:
  // it is initialised from init_seed as a new model's would be.
  static std::unique_ptr<Esm2Model> from_hf_dir(const std::string& dir, Device device,
                                                Precision precision = Precision::F32, uint64_t init_seed = 42,
                                                ParamShard shard = {});
  // config.json and the ESM tokenizer files (the weights: LanguageModel::save_hf_dir).
  void save_hf_metadata(const std::string& dir) const override;

  std::string family() const override { return "esm2"; }
  const Esm2Config& config() const { return cfg_; }

 private:
  Esm2Config cfg_;
};

}  // namespace biofm
