// Linear layers: y = x·Wᵀ + b with W stored [out, in] (the Hugging Face layout).
// Conventions for every op family: activation gradients are overwritten; parameter
// gradients are accumulated (+=), so micro-batch accumulation and tied weights need no
// extra pass. An undefined Tensor means "not wanted" (skip that output).
#pragma once
#include "biofm/ops/dispatch.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

// out[N,O] = x[N,I] · w[O,I]ᵀ (+ bias[O] if defined) (+ residual[N,O] if defined: a block's
// residual add folded into the GEMM). x, out (and dx, dout) may carry extra leading
// dimensions: they are read as matrices of numel/last-dim rows. residual must not alias out.
void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual = Tensor());
// dx[N,I] = dout·w (overwritten, if defined); dw[O,I] += doutᵀ·x; dbias[O] += Σ_n dout.
void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w);

// FP8 linear layers (fp8_config in training configs): x and w are quantized to `fwd`, dout to
// `bwd`, each with its own per-tensor scale from its current amax (ops/fp8/op.h); the products
// accumulate in fp32 on Hopper's FP8 tensor cores; out and dx come out in x's dtype, dw and
// dbias (F32) accumulate as above; dbias sums the unquantized dout. HYBRID = E4M3 forward,
// E5M2 gradients. In and out features must be multiples of 16. The CPU version is the
// reference: the same quantization, then the fp32 GEMMs.
struct Fp8Recipe {
  Fp8Type fwd = Fp8Type::E4M3;
  Fp8Type bwd = Fp8Type::E5M2;
};
// The transposed FP8 codes of a layer's input (and their scale_inv), written by the forward
// GEMM's quantization pass when asked for and read by backward for the weight gradient, so
// that backward does not quantize x again. CUDA only (the CPU reference quantizes again).
struct Fp8SavedInput {
  Tensor codes_t, scale_inv;
};
void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual,
                        const Fp8Recipe& recipe, Fp8SavedInput* save = nullptr);
void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& w, const Fp8Recipe& recipe, const Fp8SavedInput* saved = nullptr);

namespace cpu {
void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual,
                        const Fp8Recipe& recipe, Fp8SavedInput* save = nullptr);
void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& w, const Fp8Recipe& recipe, const Fp8SavedInput* saved = nullptr);
void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual = Tensor());
void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w);
}  // namespace cpu
namespace cuda {
void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual,
                        const Fp8Recipe& recipe, Fp8SavedInput* save = nullptr);
void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& w, const Fp8Recipe& recipe, const Fp8SavedInput* saved = nullptr);
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

inline void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                               const Tensor& residual, const Fp8Recipe& recipe, Fp8SavedInput* save) {
  BIOFM_DISPATCH(x.device(), linear_forward_fp8, out, x, w, bias, residual, recipe, save);
}
inline void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                                const Tensor& w, const Fp8Recipe& recipe, const Fp8SavedInput* saved) {
  BIOFM_DISPATCH(x.device(), linear_backward_fp8, dx, dw, dbias, dout, x, w, recipe, saved);
}

}  // namespace biofm::ops
