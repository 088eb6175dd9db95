// LayerNorm (ESM-2) and RMSNorm (Llama), over the last dimension of x[N,C].
#pragma once
#include "biofm/ops/dispatch.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

// out = (x - mean) * rstd * w + b; mean[N], rstd[N] (F32) saved for backward.
// b undefined: no bias. mean/rstd undefined in forward: not saved (inference). out_amax, when
// defined (F32 [1]), is set to max |out| as stored (as rmsnorm_forward's).
void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b, float eps, const Tensor& out_amax = Tensor());
// dx overwritten (plus dres, the residual branch's gradient, when defined: the residual add of
// a pre-norm block folded into the same pass); dw, db accumulated. dres may alias dx. dx_amax,
// when defined (F32 [1]), is set to max |dx| as stored (for the FP8 quantization of dx).
void layernorm_backward(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd,
                        const Tensor& dres = Tensor(), const Tensor& dx_amax = Tensor());

// out = x * rstd * w with rstd = 1/sqrt(mean(x²) + eps); rstd[N] saved. out_amax, when
// defined (F32 [1]), is set to max |out| as stored (for FP8 scaling without another pass).
void rmsnorm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& w, float eps,
                     const Tensor& out_amax = Tensor());
void rmsnorm_backward(Tensor& dx, Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, const Tensor& dres = Tensor(), const Tensor& dx_amax = Tensor());

// The forwards whose output exists only as the next GEMM's FP8 codes: under DelayedScaling the
// scale is known before the output is, so the norm writes the codes itself and its bf16 output is
// never stored. Each output value is rounded to x's dtype as layernorm_forward / rmsnorm_forward
// store it, then quantized as fp8_quantize would with the scale of `amax` (F32 [1], required:
// the delayed scale's amax): row-major codes into q [N, C], transposed codes into q_t [C, Np]
// (undefined: not written; Np >= N a multiple of 16, rows past N zero codes), scale_inv [1].
// record (F32, required): the consumer's delayed-scaling history row (fp8/delayed.h), whose slot 0
// is max-folded with max |output| (not zeroed first: the slot holds the earlier micro batches'
// amax), so that no other pass or launch records it; mean / rstd as the bf16 ops. On the GPU C
// must be a multiple of 16 and the tensors 16-byte aligned.
void layernorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& mean, Tensor& rstd, const Tensor& x,
                           const Tensor& w, const Tensor& b, float eps, Fp8Type t, const Tensor& amax,
                           const Tensor& record);
void rmsnorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& rstd, const Tensor& x, const Tensor& w,
                         float eps, Fp8Type t, const Tensor& amax, const Tensor& record);

BIOFM_BACKENDS(layernorm_forward, layernorm_backward, rmsnorm_forward, rmsnorm_backward, layernorm_forward_fp8,
               rmsnorm_forward_fp8)

namespace cuda {
// How many layernorm_forward_fp8 / rmsnorm_forward_fp8 calls have run on the GPU in this process
// (tests).
int64_t norm_forward_fp8_calls();
}  // namespace cuda

}  // namespace biofm::ops
