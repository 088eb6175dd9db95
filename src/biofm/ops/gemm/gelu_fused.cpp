// The GEMM + exact-GELU pair unfused, on either device: the CPU backend, and the CUDA backend's
// fallback where its fused CUTLASS kernels do not apply (gelu_fused_cuda.cu).
#include "biofm/ops/activation/op.h"
#include "biofm/ops/gemm/op.h"

namespace biofm::ops {

namespace unfused {
void linear_gelu_forward(Tensor& act, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias) {
  Tensor& p = pre.defined() ? pre : act;  // pre not wanted: act holds it until GELU overwrites it
  linear_forward(p, x, w, bias);
  gelu_forward(act, p, GeluKind::Erf);
}

void linear_dgelu_backward(Tensor& dpre, const Tensor& dout, const Tensor& w, const Tensor& pre) {
  Tensor none;
  // linear_backward reads only x's shape and dtype when dw is not wanted; pre has both.
  linear_backward(dpre, none, none, dout, pre, w);
  gelu_backward(dpre, dpre, pre, GeluKind::Erf);
}
}  // namespace unfused

namespace cpu {
void linear_gelu_forward(Tensor& act, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias) {
  unfused::linear_gelu_forward(act, pre, x, w, bias);
}
void linear_dgelu_backward(Tensor& dpre, const Tensor& dout, const Tensor& w, const Tensor& pre) {
  unfused::linear_dgelu_backward(dpre, dout, w, pre);
}
}  // namespace cpu

}  // namespace biofm::ops
