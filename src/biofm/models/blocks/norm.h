// Norm: LayerNorm (ESM-2: weight and bias) or RMSNorm (Llama: weight only) over the hidden
// dimension, with the statistics backward needs.
#pragma once
#include "biofm/models/blocks/common.h"

namespace biofm {

enum class NormKind { LayerNorm, RMSNorm };

struct NormStats {
  Tensor mean, rstd;  // F32 [T]; mean for LayerNorm only
};

class Norm {
 public:
  Norm() = default;
  Norm(const BlockContext* ctx, NormKind kind, ParamRef weight, ParamRef bias, float eps)
      : ctx_(ctx), kind_(kind), w_(weight), b_(bias), eps_(eps) {}

  bool defined() const { return w_.defined(); }
  // out = norm(x) (allocated here); stats are allocated when undefined and overwritten.
  // out_amax (F32 [1]), when defined, receives max |out| (what an FP8 quantization of out needs,
  // without another pass over it).
  void forward(Tensor& out, NormStats& st, const Tensor& x, const Tensor& out_amax = Tensor()) const;
  // The output only as the next GEMM's FP8 codes of type t, with the scale of scale_amax (its
  // consumer's delayed scale; ops::layernorm_forward_fp8 / rmsnorm_forward_fp8): codes allocated
  // here, max |out| folded into the consumer's history row `record` (Linear::producer_record).
  // Only where can_write_codes(x).
  void forward_codes(ops::Fp8Codes& codes, NormStats& st, const Tensor& x, ops::Fp8Type t, const Tensor& scale_amax,
                     const Tensor& record) const;
  // Whether forward_codes runs for x: on the GPU, rows of a multiple of 16 features, x and the
  // norm's parameters 16-byte aligned.
  bool can_write_codes(const Tensor& x) const;
  // dx = dnorm/dx · dout, plus dres when defined (a pre-norm block's residual gradient, folded
  // into the same pass; may alias dx); weight (and bias) gradients accumulate. dx_amax as
  // forward's out_amax, for dx.
  void backward(Tensor& dx, const Tensor& dout, const Tensor& x, const NormStats& st,
                const Tensor& dres = Tensor(), const Tensor& dx_amax = Tensor()) const;

 private:
  const BlockContext* ctx_ = nullptr;
  NormKind kind_ = NormKind::LayerNorm;
  ParamRef w_, b_;
  float eps_ = 1e-5f;
};

}  // namespace biofm
