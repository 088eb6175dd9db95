// Llama 3 causal language model, as Hugging Face `LlamaForCausalLM` computes it:
// token embedding → pre-norm decoder layers with rotary, causal, grouped-query attention (no
// biases, RMSNorm, SwiGLU MLP) → final RMSNorm → lm_head (or the embedding matrix when tied)
// → next-token CE on labels that the batcher has already shifted (causal.h).
//
// The forward and backward passes (and KV-cached decoding) are TransformerLM's; this family
// is its parameter table, Hugging Face names, block recipe and head.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "biofm/models/llama/config.h"
#include "biofm/models/transformer_lm.h"

namespace biofm {

using LlamaKvCache = KvCache;

class LlamaModel : public TransformerLM {
 public:
  // no_decay_on_1d_and_embeddings: the OpenGenome2 parameter grouping (no weight decay on
  // the RMSNorm weights and the token embedding); otherwise every parameter is decayed.
  LlamaModel(const LlamaConfig& config, Device device, Precision precision = Precision::F32,
             bool no_decay_on_1d_and_embeddings = false, ParamShard shard = {});

  static std::vector<ParamSpec> param_table(const LlamaConfig& c, bool no_decay_on_1d_and_embeddings = false);
  static ArchSpec arch(const LlamaConfig& c);
  // Reads a Hugging Face directory (config.json + weights; rotary inv_freq buffers ignored,
  // lm_head.weight absent or ignored when tied). A bare LlamaModel's untied head is
  // initialised from init_seed as a new model's would be.
  static std::unique_ptr<LlamaModel> from_hf_dir(const std::string& dir, Device device,
                                                 Precision precision = Precision::F32,
                                                 bool no_decay_on_1d_and_embeddings = false, uint64_t init_seed = 42,
                                                 ParamShard shard = {});
  // config.json (transformers-5 shape) and the nucleotide tokenizer files.
  void save_hf_metadata(const std::string& dir) const override;

  std::string family() const override { return "llama"; }
  const LlamaConfig& config() const { return cfg_; }

 private:
  LlamaConfig cfg_;
};

}  // namespace biofm
