// LayerNorm (ESM-2) and RMSNorm (Llama), over the last dimension of x[N,C].
#pragma once
#include "biofm/ops/dispatch.h"

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

BIOFM_BACKENDS(layernorm_forward, layernorm_backward, rmsnorm_forward, rmsnorm_backward)

}  // namespace biofm::ops
