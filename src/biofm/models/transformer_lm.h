// TransformerLM: a language model assembled from the shared blocks (blocks/): token
// embedding → TransformerStack of pre-norm layers → final norm → LM head → cross-entropy.
// A family (esm2/, llama/) is a parameter table, a Hugging Face name map and an ArchSpec —
// which parameters each block reads and how the blocks are configured — plus its config.json
// and tokenizer files; the forward and backward passes are all here.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "biofm/models/blocks/embedding_head.h"
#include "biofm/models/blocks/stack.h"
#include "biofm/models/language_model.h"

namespace biofm {

// The parameters of layer l, by Hugging Face name ("" = absent, e.g. no bias).
struct LayerParamNames {
  std::string norm1_weight, norm1_bias;
  std::vector<std::string> qkv_weight, qkv_bias;  // q, k, v: adjacent in the table (one GEMM)
  std::string out_weight, out_bias;
  std::string norm2_weight, norm2_bias;
  std::vector<std::string> mlp_in_weight;  // one (GELU) or gate, up (SwiGLU; adjacent)
  std::string mlp_in_bias;
  std::string mlp_out_weight, mlp_out_bias;
};

// A family's block recipe.
struct ArchSpec {
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int64_t parameters = 0;  // as the family counts them (tied weights once)
  int64_t max_positions = 0;
  NormKind norm = NormKind::LayerNorm;
  float norm_eps = 1e-5f;
  MlpKind mlp = MlpKind::Gelu;
  bool causal = false;
  std::vector<float> rope_inv_freq;  // [head_dim/2]; empty: no rotary positions
  // Embedding (esm_rescale: ESM-2's token dropout rescaling with mask_token_id, -1 for none).
  std::string embed_weight;
  bool esm_rescale = false;
  int32_t mask_token_id = -1;
  std::string position_embed_weight;                // learned absolute positions ("" = none)
  std::string embed_norm_weight, embed_norm_bias;   // a LayerNorm after the embedding ("" = none)
  bool pre_norm = true;                              // false: post-norm layers (BERT)
  std::function<LayerParamNames(int)> layer_names;
  std::string final_norm_weight, final_norm_bias;  // "" = none (post-norm stacks end normalised)
  // LM head: optional dense → GELU → LayerNorm transform ("" = none), then the decoder.
  std::string head_dense_weight, head_dense_bias, head_norm_weight, head_norm_bias;
  std::string decoder_weight, decoder_bias;
};

class TransformerLM : public LanguageModel {
 public:
  // shard: fully sharded training builds only this rank's part of the parameters (params.h).
  TransformerLM(std::vector<ParamSpec> table, ArchSpec spec, Device device, Precision precision,
                ParamShard shard = {});
  TransformerLM(const TransformerLM&) = delete;
  TransformerLM& operator=(const TransformerLM&) = delete;

  ModelDims dims() const override;
  ParamStore& params() override { return params_; }
  const ParamStore& params() const override { return params_; }
  Device device() const override { return params_.device(); }
  DType act_dtype() const { return ctx_.act_dtype; }
  void set_recompute(bool on, int layers = -1) override { stack_.set_recompute(on, layers); }
  void set_fp8(std::optional<ops::Fp8Recipe> recipe) override;
  void set_layer_quant(std::vector<ops::LayerQuant> layers) override;
  const std::vector<ops::LayerQuant>& layer_quant() const override { return ctx_.layer_quant; }
  void quant_step_end() override;
  std::vector<std::pair<std::string, Tensor>> quant_state() const override;
  void quant_state_loaded() override;
  void set_quant_stats(ops::QuantStatsCollector* c) override { ctx_.stats = c; }
  void set_layer_hook(LayerHook hook) override { layer_hook_ = std::move(hook); }
  void set_context_parallel_group(Communicator* group) override { ctx_.cp_group = group; }
  int32_t token_dropout_mask_id() const override { return spec_.esm_rescale ? spec_.mask_token_id : -1; }
  std::pair<int64_t, int64_t> layer_param_range(int layer) const override;

  Tensor hidden_states(const Batch& b) override;
  std::vector<Tensor> layer_hidden_states(const Batch& b, const std::vector<int>& layers) override;
  Tensor logits(const Batch& b) override;
  LossSums evaluate(const Batch& b, bool count_correct) override;
  Tensor token_losses(const Batch& b) override;
  void forward_backward(const Batch& b, float grad_scale, Tensor& loss_acc) override;

  // ---- Incremental decoding (causal models) ----
  // An empty cache for up to `capacity` tokens.
  KvCache new_cache(int64_t capacity) const;
  // Runs `ids` as the continuation of the cached tokens (positions cache.length, ...),
  // appends their keys/values and returns the logits of the new rows [n,V] on the model's
  // device. The first call (empty cache) is a causal forward over the prompt; later calls
  // compute only the new rows, attending to the cache.
  Tensor forward_cached(const std::vector<int32_t>& ids, KvCache& cache);

  void prepare_forward(const std::vector<BatchShape>& batches) override;

 protected:
  const ArchSpec& spec() const { return spec_; }
  AttentionSpec attention_spec() const { return {spec_.heads, spec_.kv_heads, spec_.head_dim, spec_.causal}; }

 private:
  void check_batch(const Batch& b) const;
  Tensor final_hidden(const Batch& b, KvCache* cache);

  ParamStore params_;
  BlockContext ctx_;
  ArchSpec spec_;
  Tensor inv_freq_;  // F32 [head_dim/2] on the device (zeros: no rotary)
  TokenEmbedding embed_;
  TransformerStack stack_;
  Norm final_norm_;
  LmHead head_;
  std::vector<std::pair<int64_t, int64_t>> layer_ranges_;
  LayerHook layer_hook_;
};

}  // namespace biofm
