// Linear layers: y = x·Wᵀ + b with W stored [out, in] (the Hugging Face layout).
// Conventions for every op family: activation gradients are overwritten; parameter
// gradients are accumulated (+=), so micro-batch accumulation and tied weights need no
// extra pass. An undefined Tensor means "not wanted" (skip that output).
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

// out[N,O] = x[N,I] · w[O,I]ᵀ (+ bias[O] if defined) (+ residual[N,O] if defined: a block's
// residual add folded into the GEMM). x, out (and dx, dout) may carry extra leading
// dimensions: they are read as matrices of numel/last-dim rows. residual must not alias out.
void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual = Tensor());
// dx[N,I] = dout·w (overwritten, if defined); dw[O,I] += doutᵀ·x; dbias[O] += Σ_n dout.
void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w);

namespace cpu {
void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual = Tensor());
void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w);
}  // namespace cpu
namespace cuda {
void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual = Tensor());
void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w);
}  // namespace cuda

inline void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                           const Tensor& residual) {
  BIOFM_DISPATCH(x.device(), linear_forward, out, x, w, bias, residual);
}
inline void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout,
                            const Tensor& x, const Tensor& w) {
  BIOFM_DISPATCH(x.device(), linear_backward, dx, dw, dbias, dout, x, w);
}

}  // namespace biofm::ops
