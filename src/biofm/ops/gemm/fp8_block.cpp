// Float8BlockScaling linear layers, emulated (op.h): each GEMM operand quantized and dequantized
// in its blocks, then the ordinary GEMMs of its device. The CPU's reference and the CUDA path's
// fallback for shapes the native block-scaled GEMMs do not take.
#include "biofm/ops/blockscale/op.h"
#include "biofm/ops/gemm/op.h"

namespace biofm::ops {
namespace {

BlockQuant spec(const Fp8BlockRecipe& r, Fp8Type t, bool weight, bool along_cols) {
  return float8_block_quant(t, r.f32_scales, weight, along_cols);
}

// t quantized and dequantized, in t's dtype on CUDA (bf16 values of a power-of-two scale are
// exact), F32 on the CPU.
Tensor dequantized(const Tensor& t, const BlockQuant& b) {
  Tensor out = Tensor::empty(t.shape(), t.device() == Device::CPU ? DType::F32 : t.dtype(), t.device());
  block_fake_quantize(out, t, b);
  return out;
}

}  // namespace

void linear_forward_fp8_block_emulated(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                                       const Tensor& residual, const Fp8BlockRecipe& r) {
  linear_forward(out, dequantized(x, spec(r, r.fwd, false, true)), dequantized(w, spec(r, r.fwd, true, true)), bias,
                 residual);
}

void linear_backward_fp8_block_emulated(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                                        const Tensor& w, const Fp8BlockRecipe& r) {
  Tensor none;
  if (dx.defined())  // dx = dout·w: contraction over the output features
    linear_backward(dx, none, none, dequantized(dout, spec(r, r.bwd, false, true)), x,
                    dequantized(w, spec(r, r.fwd, true, true)));
  if (dw.defined())  // dw += doutᵀ·x: contraction over the tokens
    linear_backward(none, dw, none, dequantized(dout, spec(r, r.bwd, false, false)),
                    dequantized(x, spec(r, r.fwd, false, false)), w);
  if (dbias.defined()) linear_backward(none, none, dbias, dout, x, w);  // from the unquantized gradient
}

}  // namespace biofm::ops
