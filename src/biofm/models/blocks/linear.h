// Linear: out = x·Wᵀ (+ bias) (+ residual), in the compute precision or, when the block is
// FP8-capable and the context's recipe is set, as FP8 GEMMs (ops/gemm/op.h). The block owns
// its FP8 state: the codes of its weight, both forms, kept across the micro batches of an
// optimizer step and recomputed when the parameter store's version() or the recipe changes.
// The embedding and LM head stay in the compute precision, as in the recipes (Transformer
// Engine's FP8 covers the layers' Linear modules only).
#pragma once
#include "biofm/models/blocks/common.h"

namespace biofm {

class Linear {
 public:
  Linear() = default;
  Linear(const BlockContext* ctx, ParamRef weight, ParamRef bias, bool fp8_capable)
      : ctx_(ctx), w_(weight), b_(bias), fp8_capable_(fp8_capable) {}

  bool fp8() const { return fp8_capable_ && ctx_->fp8.has_value(); }
  Tensor weight() const { return w_.weight(*ctx_->params); }

  // residual: added as the GEMM's C operand (undefined: none). FP8 only: save keeps x's
  // transposed codes for backward (null: backward quantizes x again); x_amax is max |x| from
  // the kernel that wrote x (undefined: computed here).
  void forward(Tensor& out, const Tensor& x, const Tensor& residual = Tensor(), ops::Fp8SavedInput* save = nullptr,
               const Tensor& x_amax = Tensor()) const;
  // dx = dout·W (overwritten); dW += doutᵀ·x, dbias += Σ dout. FP8 only: saved from forward,
  // dout_amax max |dout| from its producer.
  void backward(Tensor& dx, const Tensor& dout, const Tensor& x, const ops::Fp8SavedInput* saved = nullptr,
                const Tensor& dout_amax = Tensor()) const;

 private:
  // The weight-code cache, emptied when the parameters changed; null where it cannot serve.
  ops::Fp8WeightCodes* codes(const Tensor& w) const;

  const BlockContext* ctx_ = nullptr;
  ParamRef w_, b_;
  bool fp8_capable_ = false;
  mutable ops::Fp8WeightCodes codes_;
  mutable uint64_t codes_version_ = ~uint64_t(0), codes_epoch_ = ~uint64_t(0);
};

}  // namespace biofm
