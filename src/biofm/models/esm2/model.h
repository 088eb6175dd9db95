// ESM-2 masked language model, as Hugging Face `EsmForMaskedLM` computes it (FACTS.md):
// embeddings with token dropout → pre-LN transformer layers with rotary attention →
// emb_layer_norm_after → LM head (dense, GELU, LayerNorm, tied decoder + bias).
//
// Forward keeps what backward needs (per layer: inputs of each linear, norm statistics,
// attention output and logsumexp); backward walks the layers in reverse, calling each
// op's backward in turn. Parameter gradients accumulate into the flat gradient buffer.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "biofm/data/batch.h"
#include "biofm/models/esm2/config.h"
#include "biofm/models/language_model.h"
#include "biofm/models/params.h"

namespace biofm {

class Esm2Model : public LanguageModel {
 public:
  Esm2Model(const Esm2Config& config, Device device, Precision precision = Precision::F32);

  static std::vector<ParamSpec> param_table(const Esm2Config& c);
  // Reads config.json + model.safetensors from a Hugging Face directory.
  static std::unique_ptr<Esm2Model> from_hf_dir(const std::string& dir, Device device,
                                                Precision precision = Precision::F32);
  // Writes config.json + model.safetensors (fp32, Hugging Face names; decoder tied, omitted)
  // and the ESM tokenizer files.
  void save_hf_metadata(const std::string& dir) const override;

  std::string family() const override { return "esm2"; }
  ModelDims dims() const override;
  const Esm2Config& config() const { return cfg_; }
  ParamStore& params() override { return params_; }
  const ParamStore& params() const override { return params_; }
  Device device() const override { return params_.device(); }
  void set_recompute(bool on, int layers = -1) override {
    recompute_layers_ = !on ? 0 : layers < 0 ? std::numeric_limits<int>::max() : layers;
  }

  // Final hidden states [T,H] (after emb_layer_norm_after). Keeps no activations.
  Tensor hidden_states(const Batch& b);
  // Logits [T,V]. Keeps no activations.
  Tensor logits(const Batch& b) override;
  LossSums evaluate(const Batch& b, bool count_correct) override;
  Tensor token_losses(const Batch& b) override;
  void forward_backward(const Batch& b, float grad_scale, Tensor& loss_acc) override;

 private:
  struct LayerActs {
    Tensor x_in, ln1, ln1_mean, ln1_rstd, q, k, v, attn, lse;
    Tensor x_mid, ln2, ln2_mean, ln2_rstd, fc1, act;
    LayerFp8Inputs fp8;  // FP8 input codes kept for backward
  };
  struct HeadActs {
    Tensor x_last, final_out, final_mean, final_rstd, dense, act, head_out, head_mean, head_rstd;
  };
  struct Acts {
    Tensor token_scale;  // token dropout factor per row
    std::vector<LayerActs> layers;
    HeadActs head;
  };
  // Runs embeddings and layers; fills acts.head.final_out. keep: store per-layer activations
  // (only the layer inputs when recompute is on).
  void forward_trunk(const Batch& b, Acts& acts, bool keep);
  Tensor act(const Shape& s) const { return Tensor::empty(s, act_dtype_, device()); }
  // LM head on acts.head.final_out; returns logits [T,V].
  Tensor forward_head(Acts& acts);
  // With recompute on, the layers that are not recomputed drop ln1, ln2 and act (redone in
  // backward by these, one cheap pass each).
  void norm1(int l, LayerActs& a);
  void norm2(int l, LayerActs& a);
  void gelu(LayerActs& a);
  // x_out null: the layer output is not wanted (recompute), its last GEMM is skipped.
  void layer_forward(int l, const Batch& b, const Tensor& x, LayerActs& a, Tensor* x_out);
  void layer_backward(int l, const Batch& b, LayerActs& a, Tensor& dx);

  Esm2Config cfg_;
  ParamStore params_;
  DType act_dtype_ = DType::F32;
  int recompute_layers_ = 0;  // the first this many layers recompute in backward
  Tensor inv_freq_;  // [head_dim/2]
};

}  // namespace biofm
