// Llama 3 causal language model, as Hugging Face `LlamaForCausalLM` computes it (FACTS.md):
// token embedding → pre-norm decoder layers
//     h += o_proj(Attn(rope(q_proj(x)), rope(k_proj(x)), v_proj(x))),  x = RMSNorm1(h)
//     h += down_proj(silu(gate_proj(x)) · up_proj(x)),                  x = RMSNorm2(h)
// (causal attention within each sequence, scale head_dim^-0.5, grouped-query heads, no
// biases) → final RMSNorm → lm_head (or the embedding matrix when tied) → next-token CE on
// labels that the batcher has already shifted (causal.h: labels[t] = ids[t+1]).
//
// Precision and activation recompute work as in Esm2Model. For generation the model also
// runs incrementally over a key/value cache (forward_cached), computing only the new rows.
#pragma once
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "biofm/data/batch.h"
#include "biofm/models/language_model.h"
#include "biofm/models/llama/config.h"
#include "biofm/models/params.h"

namespace biofm {

// Per-layer key/value buffers for incremental decoding: k[l], v[l] are [capacity, Hkv, D]
// (rotary already applied to k) on the model's device; rows [0, length) are filled.
struct LlamaKvCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
  int64_t capacity = 0;
};

class LlamaModel : public LanguageModel {
 public:
  // no_decay_on_1d_and_embeddings: the OpenGenome2 parameter grouping (no weight decay on
  // the RMSNorm weights and the token embedding); otherwise every parameter is decayed.
  LlamaModel(const LlamaConfig& config, Device device, Precision precision = Precision::F32,
             bool no_decay_on_1d_and_embeddings = false);

  static std::vector<ParamSpec> param_table(const LlamaConfig& c, bool no_decay_on_1d_and_embeddings = false);
  // Reads config.json + model.safetensors from a Hugging Face directory (rotary inv_freq
  // buffers ignored; lm_head.weight absent when tied).
  static std::unique_ptr<LlamaModel> from_hf_dir(const std::string& dir, Device device,
                                                 Precision precision = Precision::F32,
                                                 bool no_decay_on_1d_and_embeddings = false);
  // config.json (transformers-5 shape), model.safetensors (fp32, HF names; lm_head.weight
  // omitted when tied) and the nucleotide tokenizer files (tokenizer_files.h).
  void save_hf_metadata(const std::string& dir) const override;

  std::string family() const override { return "llama"; }
  ModelDims dims() const override;
  const LlamaConfig& config() const { return cfg_; }
  ParamStore& params() override { return params_; }
  const ParamStore& params() const override { return params_; }
  Device device() const override { return params_.device(); }
  void set_recompute(bool on, int layers = -1) override {
    recompute_layers_ = !on ? 0 : layers < 0 ? std::numeric_limits<int>::max() : layers;
  }
  DType act_dtype() const { return act_dtype_; }

  // Final hidden states [T,H] (after model.norm). Keeps no activations.
  Tensor hidden_states(const Batch& b);
  // Logits [T,V]. Keeps no activations.
  Tensor logits(const Batch& b) override;
  LossSums evaluate(const Batch& b, bool count_correct) override;
  Tensor token_losses(const Batch& b) override;
  void forward_backward(const Batch& b, float grad_scale, Tensor& loss_acc) override;

  // ---- Incremental decoding ----
  // An empty cache for up to `capacity` tokens.
  LlamaKvCache new_cache(int64_t capacity) const;
  // Runs `ids` as the continuation of the cached tokens (positions cache.length, ...),
  // appends their keys/values to the cache and returns the logits of the new rows [n,V]
  // (on the model's device). The first call (empty cache) is a normal causal forward over
  // the prompt; later calls compute only the new rows, attending to the cache.
  Tensor forward_cached(const std::vector<int32_t>& ids, LlamaKvCache& cache);

 private:
  struct LayerActs {
    Tensor x_in, n1, rstd1, q, k, v, attn, lse;
    Tensor x_mid, n2, rstd2, gate_up, h;  // gate_up [T, 2F]: gate | up per row
    LayerFp8Inputs fp8;                   // FP8 input codes kept for backward
    Tensor n1_amax, n2_amax, h_amax;      // FP8: max |n1|, |n2|, |h| from the passes that wrote them
  };
  struct Acts {
    std::vector<LayerActs> layers;
    Tensor x_last, final_out, final_rstd;
  };
  Tensor act(const Shape& s) const { return Tensor::empty(s, act_dtype_, device()); }
  const std::string& head_weight_name() const;
  // Embeddings and layers; fills acts.x_last, final_out, final_rstd. keep: store per-layer
  // activations (only the layer inputs when recompute is on). cache: incremental decoding.
  void forward_trunk(const Batch& b, Acts& acts, bool keep, LlamaKvCache* cache = nullptr);
  Tensor forward_head(const Acts& acts);  // logits [T,V]
  // With recompute on, the layers that are not recomputed drop n1, n2 and h (redone in backward
  // by these, one cheap pass each).
  void norm1(int l, LayerActs& a);
  void norm2(int l, LayerActs& a);
  void swiglu(LayerActs& a);
  // x_out null: the layer output is not wanted (recompute), its last GEMM is skipped.
  void layer_forward(int l, const Batch& b, const Tensor& x, LayerActs& a, Tensor* x_out,
                     LlamaKvCache* cache = nullptr);
  void layer_backward(int l, const Batch& b, LayerActs& a, Tensor& dx);

  LlamaConfig cfg_;
  ParamStore params_;
  DType act_dtype_ = DType::F32;
  int recompute_layers_ = 0;  // the first this many layers recompute in backward
  Tensor inv_freq_;  // [head_dim/2] F32 on the device
  std::string embed_name_ = "model.embed_tokens.weight", lm_head_name_ = "lm_head.weight";
};

}  // namespace biofm
