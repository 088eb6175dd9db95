// Linear: out = x·Wᵀ (+ bias) (+ residual), in the precision its transformer layer was assigned
// (BlockContext::layer_quant, ops/fp8/recipe.h):
//   - the compute precision (bf16, fp32 on the CPU);
//   - FP8 Float8CurrentScaling / DelayedScaling: FP8 GEMMs (ops/gemm/op.h) on CUDA, the same
//     quantization emulated around fp32 GEMMs on the CPU. The block owns its FP8 state: the
//     codes of its weight, both forms, kept across the micro batches of an optimizer step and
//     recomputed when the parameter store's version() or the recipe changes; with delayed
//     scaling, its three rows (input, weight, output gradient) of the context's amax history;
//   - Float8BlockScaling: block-scaled FP8 GEMMs on CUDA (ops::linear_*_fp8_block, weight codes
//     cached as above), the same quantization emulated around fp32 GEMMs on the CPU;
//   - MXFP8BlockScaling, NVFP4BlockScaling: emulated on both (quantized and dequantized per GEMM
//     operand along the GEMM's contraction dimension, ops/blockscale/op.h, then the GEMMs in the
//     compute precision: fp32 on the CPU, bf16 on CUDA).
// The embedding and LM head stay in the compute precision, as in the recipes (Transformer
// Engine's quantization covers the layers' Linear modules only).
#pragma once
#include "biofm/models/blocks/common.h"

namespace biofm {

class Linear {
 public:
  Linear() = default;
  // layer >= 0: projection `proj` (0..3: q|k|v, output, MLP in, MLP out) of that transformer
  // layer, quantized as the layer says; layer < 0: always the compute precision.
  Linear(const BlockContext* ctx, ParamRef weight, ParamRef bias, int layer = -1, int proj = 0)
      : ctx_(ctx), w_(weight), b_(bias), layer_(layer), proj_(proj) {}

  // Whether this linear runs FP8 GEMMs with per-tensor scales (current or delayed scaling):
  // then a producer's max |x| saves the quantization a pass.
  bool fp8() const;
  // Whether it runs in the compute precision (no quantization of any kind).
  bool plain() const { return ctx_->quant_of(layer_) == nullptr; }
  Tensor weight() const { return w_.weight(*ctx_->params); }
  Tensor bias() const { return b_.weight(*ctx_->params); }

  // residual: added as the GEMM's C operand (undefined: none). FP8 only: save keeps x's
  // transposed codes for backward (null: backward quantizes x again); x_amax is max |x| from
  // the kernel that wrote x (undefined: computed here); x_codes: x exists only as the codes its
  // producer made with producer_scale_amax(0), max |x| folded into producer_record(0) (pass an
  // undefined x and x_amax; producer_quant() only).
  void forward(Tensor& out, const Tensor& x, const Tensor& residual = Tensor(), ops::Fp8SavedInput* save = nullptr,
               const Tensor& x_amax = Tensor(), const ops::Fp8Codes* x_codes = nullptr) const;
  // dx = dout·W (overwritten); dW += doutᵀ·x, dbias += Σ dout. FP8 only: saved from forward,
  // dout_amax max |dout| from its producer; dout_codes: dout exists only as its producer's codes
  // (made with producer_scale_amax(2), max |dout| folded into producer_record(2), no dout_amax;
  // the producer also added Σ dout to bias_grad()).
  void backward(Tensor& dx, const Tensor& dout, const Tensor& x, const ops::Fp8SavedInput* saved = nullptr,
                const Tensor& dout_amax = Tensor(), const ops::Fp8Codes* dout_codes = nullptr) const;

  // DelayedScaling on CUDA (and no FP8 statistics this step): the layer's recipe, whose scales
  // are known before a tensor is made, so that a producer can quantize this linear's input or
  // output gradient for it (ops::fp8_quantize_gelu, then x_codes / dout_codes). Null elsewhere.
  const ops::LayerQuant* producer_quant() const;
  // producer_quant() and a weight the FP8 GEMMs take (both dimensions multiples of 16, 16-byte
  // aligned; elsewhere the layer falls back to bf16, which needs the bf16 input): whether a
  // producer may hand this linear its input or output gradient as codes.
  bool takes_codes() const;
  // The delayed scale (as an amax) of role 0 (input) or 2 (output gradient).
  Tensor producer_scale_amax(int role) const { return scale_amax(role); }
  // The amax history row of role 0 or 2: a producer of codes folds its max |.| into its slot 0
  // in the same pass (the op's `record`), so that recording it takes no launch of its own.
  Tensor producer_record(int role) const { return history_row(role); }
  Tensor bias_grad() const { return b_.grad(*ctx_->params); }
  // FP8 current or delayed scaling on CUDA: makes the weight's codes (both forms) for this
  // optimizer step now, as the first forward would (the same call, so the same codes), unless
  // they exist. Whether it queued work. The stack calls it on the side stream one layer ahead
  // (ops.fp8_weights_ahead).
  bool make_weight_codes() const;
  // Whether make_weight_codes() would queue work now.
  bool weight_codes_due() const;

 private:
  // The weight-code cache, emptied when the parameters changed; null where it cannot serve.
  ops::Fp8WeightCodes* codes(const Tensor& w) const;
  // DelayedScaling: this linear's history row and scale_amax ([1] view) of tensor role 0..2.
  Tensor history_row(int role) const;
  Tensor scale_amax(int role) const;
  void forward_delayed(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& residual,
                       const ops::LayerQuant& q, ops::Fp8SavedInput* save, const Tensor& x_amax,
                       const ops::Fp8Codes* x_codes) const;
  void backward_delayed(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x, const Tensor& w,
                        const ops::LayerQuant& q, const ops::Fp8SavedInput* saved, const Tensor& dout_amax,
                        const ops::Fp8Codes* dout_codes) const;
  void forward_emulated(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& residual,
                        const ops::LayerQuant& q) const;
  void backward_emulated(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x, const Tensor& w,
                         const ops::LayerQuant& q) const;

  // Statistics of one quantized tensor (role 0 input, 1 weight, 2 output gradient).
  void collect_stats(int role, const Tensor& t, const ops::LayerQuant& q) const;

  const BlockContext* ctx_ = nullptr;
  ParamRef w_, b_;
  int layer_ = -1, proj_ = 0;
  mutable ops::Fp8WeightCodes codes_;
  mutable uint64_t codes_version_ = ~uint64_t(0), codes_epoch_ = ~uint64_t(0);
  mutable uint64_t calls_ = 0;  // stochastic rounding: a new random stream per backward
};

}  // namespace biofm
