// ESM-2 masked language model, as Hugging Face `EsmForMaskedLM` computes it (FACTS.md):
// embeddings with token dropout → pre-LN transformer layers with rotary attention →
// emb_layer_norm_after → LM head (dense, GELU, LayerNorm, tied decoder + bias).
//
// Forward keeps what backward needs (per layer: inputs of each linear, norm statistics,
// attention output and logsumexp); backward walks the layers in reverse, calling each
// op's backward in turn. Parameter gradients accumulate into the flat gradient buffer.
#pragma once
#include <string>
#include <vector>

#include "biofm/data/batch.h"
#include "biofm/models/esm2/config.h"
#include "biofm/models/params.h"

namespace biofm {

struct LossSums {
  double loss_sum = 0;      // Σ token losses over labelled tokens
  int64_t num_tokens = 0;   // labelled tokens
  int64_t num_correct = 0;  // argmax == label (only when asked for)
};

class Esm2Model {
 public:
  Esm2Model(const Esm2Config& config, Device device);

  static std::vector<ParamSpec> param_table(const Esm2Config& c);
  // Reads config.json + model.safetensors from a Hugging Face directory.
  static Esm2Model from_hf_dir(const std::string& dir, Device device);
  // Writes config.json + model.safetensors (fp32, Hugging Face names; decoder tied, omitted).
  void save_hf_dir(const std::string& dir) const;

  const Esm2Config& config() const { return cfg_; }
  ParamStore& params() { return params_; }
  const ParamStore& params() const { return params_; }
  Device device() const { return params_.device(); }

  // Final hidden states [T,H] (after emb_layer_norm_after). Keeps no activations.
  Tensor hidden_states(const Batch& b);
  // Logits [T,V]. Keeps no activations.
  Tensor logits(const Batch& b);
  // Loss sums for the batch without gradients (count_correct: also argmax accuracy).
  LossSums evaluate(const Batch& b, bool count_correct);
  // Forward + backward: gradients of (Σ token losses) · grad_scale accumulate into the
  // gradient buffer. Returns the unscaled loss sums.
  LossSums forward_backward(const Batch& b, float grad_scale);

 private:
  struct LayerActs {
    Tensor x_in, ln1, ln1_mean, ln1_rstd, q, k, v, attn, lse;
    Tensor x_mid, ln2, ln2_mean, ln2_rstd, fc1, act;
  };
  struct HeadActs {
    Tensor x_last, final_out, final_mean, final_rstd, dense, act, head_out, head_mean, head_rstd;
  };
  struct Acts {
    Tensor token_scale;  // token dropout factor per row
    std::vector<LayerActs> layers;
    HeadActs head;
  };
  // Runs embeddings and layers; fills acts.head.final_out. keep: store per-layer activations.
  void forward_trunk(const Batch& b, Acts& acts, bool keep);
  // LM head on acts.head.final_out; returns logits [T,V].
  Tensor forward_head(Acts& acts);
  void layer_forward(int l, const Batch& b, const Tensor& x, LayerActs& a, Tensor& x_out);
  void layer_backward(int l, const Batch& b, LayerActs& a, Tensor& dx);

  Esm2Config cfg_;
  ParamStore params_;
  Tensor inv_freq_;  // [head_dim/2]
};

}  // namespace biofm
