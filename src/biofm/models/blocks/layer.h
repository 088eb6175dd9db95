// A transformer layer, pre-norm (ESM-2, Llama):
//     x_mid = x + Attn(Norm1(x)),        x_out = x_mid + Mlp(Norm2(x_mid))
// or post-norm (BERT, Geneformer):
//     x_mid = Norm1(x + Attn(x)),        x_out = Norm2(x_mid + Mlp(x_mid)).
// The residual adds ride in the output projections' GEMMs (forward); pre-norm backward folds
// the residual gradient into the norms' backward (dres).
#pragma once
#include <initializer_list>

#include "biofm/models/blocks/attention.h"
#include "biofm/models/blocks/mlp.h"
#include "biofm/models/blocks/norm.h"

namespace biofm {

struct LayerActs {
  Tensor x_in, xn1, x_mid, xn2;  // pre-norm: xn1/xn2 the norms' outputs
  Tensor h1, h2;                 // post-norm: the norms' inputs (residual sums)
  NormStats st1, st2;
  Tensor xn1_amax, xn2_amax;  // FP8: max |xn| from the norm kernels
  AttentionActs attn;
  MlpActs mlp;
  bool keep_fp8 = false;  // keep the FP8 input codes for backward
  bool lean = false;      // the cheap activations were dropped (drop_cheap)

  // Only x_in was kept (FP8 attention keeps the codes of q, k, v instead of the tensors).
  bool recompute_pending() const { return !attn.qkv.defined() && !attn.q.defined() && !attn.fp8_attn.q.defined(); }
};

class TransformerLayer {
 public:
  TransformerLayer() = default;
  TransformerLayer(const BlockContext* ctx, Norm norm1, SelfAttention attn, Norm norm2, Mlp mlp, bool pre_norm = true)
      : ctx_(ctx), norm1_(norm1), attn_(std::move(attn)), norm2_(norm2), mlp_(std::move(mlp)), pre_norm_(pre_norm) {}

  // x_out null: the output is not wanted (recompute), the last GEMM is skipped.
  void forward(int layer, const Batch& b, const Tensor& x, LayerActs& a, Tensor* x_out, KvCache* cache) const;
  // What a lean layer drops after forward and redoes in backward, one cheap pass each:
  // the norms' outputs that only backward reads (pre-norm) and the MLP activation.
  void drop_cheap(LayerActs& a) const {
    if (pre_norm_) a.xn1 = a.xn2 = Tensor();
    a.mlp.act = Tensor();
    a.lean = true;
  }
  // dx: the gradient w.r.t. the layer's output on entry, w.r.t. its input on exit. Recomputes
  // or redoes what forward did not keep. FP8 (pre-norm): dx_amax, when given, holds max |dx|
  // on entry (or is undefined) and on exit max |dx| of the input gradient when emit_amax (the
  // layer below quantizes it), else undefined.
  void backward(int layer, const Batch& b, LayerActs& a, Tensor& dx, Tensor* dx_amax = nullptr,
                bool emit_amax = false) const;
  // Whether the MLP's output projection quantizes its gradient with per-tensor scales.
  bool mlp_out_fp8() const { return mlp_.out_fp8(); }
  // FP8 current or delayed scaling: whether the four projections' weight codes for this
  // optimizer step are still to be made, and making them now (Linear::make_weight_codes).
  bool weight_codes_due() const {
    return attn_.qkv().weight_codes_due() || attn_.out().weight_codes_due() || mlp_.in().weight_codes_due() ||
           mlp_.out().weight_codes_due();
  }
  void make_weight_codes() const {
    for (const Linear* p : {&attn_.qkv(), &attn_.out(), &mlp_.in(), &mlp_.out()}) p->make_weight_codes();
  }

 private:
  // The pre-norms; codes given: the output only as the consumer's FP8 codes (norm_writes_codes).
  void norm1(LayerActs& a, ops::Fp8Codes* codes = nullptr) const;
  void norm2(LayerActs& a, ops::Fp8Codes* codes = nullptr) const;
  // DelayedScaling (ops.fp8_norm_codes): whether norm n writes the FP8 codes of its consumer's
  // input for the forward of x (a forward that keeps its FP8 inputs, releasing the bf16 ones).
  bool norm_writes_codes(const Norm& n, const Linear& consumer, const LayerActs& a, const Tensor& x) const;
  void backward_post_norm(int layer, const Batch& b, LayerActs& a, Tensor& dx) const;

  const BlockContext* ctx_ = nullptr;
  Norm norm1_;
  SelfAttention attn_;
  Norm norm2_;
  Mlp mlp_;
  bool pre_norm_ = true;
};

}  // namespace biofm
