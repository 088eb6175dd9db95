// Activations: GELU (exact erf form, and the tanh approximation) and SwiGLU.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

enum class GeluKind { Erf, Tanh };

// out = gelu(x), elementwise (out may alias x).
void gelu_forward(Tensor& out, const Tensor& x, GeluKind kind, const Tensor& out_amax = Tensor());
// dx = dout · gelu'(x) (dx may alias dout).
void gelu_backward(Tensor& dx, const Tensor& dout, const Tensor& x, GeluKind kind, const Tensor& dx_amax = Tensor());
// out_amax / dx_amax as the SwiGLU ones below: max |value written|, for an FP8 quantization.

// out[N,F] = silu(gate[N,F]) * up[N,F].
void swiglu_forward(Tensor& out, const Tensor& gate, const Tensor& up);
void swiglu_backward(Tensor& dgate, Tensor& dup, const Tensor& dout, const Tensor& gate,
                     const Tensor& up);
// The same on one packed gate_up[N, 2F] (rows gate | up: the output of one GEMM against the
// stacked gate/up weights); dgate_up is overwritten. out_amax / dgate_up_amax, when defined
// (F32 [1] on the same device), are set to the largest |value| written, as stored: the amax an
// FP8 quantization of that output needs, without another pass over it.
void swiglu_forward_packed(Tensor& out, const Tensor& gate_up, const Tensor& out_amax = Tensor());
void swiglu_backward_packed(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up,
                            const Tensor& dgate_up_amax = Tensor());

BIOFM_BACKENDS(gelu_forward, gelu_backward, swiglu_forward, swiglu_backward, swiglu_forward_packed, swiglu_backward_packed)

}  // namespace biofm::ops
