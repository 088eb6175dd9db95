// The transformer layers' linear projections (q|k|v, o, MLP in and out), in the compute
// precision or, with fp8_config enabled, as FP8 GEMMs (ops/gemm/op.h). The embedding and the
// LM head stay in the compute precision, as in the recipes (Transformer Engine's FP8 covers
// the layers' Linear modules only).
#pragma once
#include <optional>

#include "biofm/ops/gemm/op.h"

namespace biofm {

// One layer's saved FP8 inputs, a slot per projection (the models keep them with the layer's
// activations when the layer is neither recomputed nor lean).
struct LayerFp8Inputs {
  bool keep = false;
  ops::Fp8SavedInput qkv, o, mlp_in, mlp_out;
  ops::Fp8SavedInput* slot(ops::Fp8SavedInput& s) { return keep ? &s : nullptr; }
};

class LayerLinears {
 public:
  void set_fp8(std::optional<ops::Fp8Recipe> recipe) { fp8_ = recipe; }
  bool fp8() const { return fp8_.has_value(); }

  // save / saved: where FP8 keeps the input's transposed codes from forward for backward
  // (null: backward quantizes x again; unused without FP8).
  void forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual = Tensor(),
               ops::Fp8SavedInput* save = nullptr) const {
    if (fp8_)
      ops::linear_forward_fp8(out, x, w, bias, residual, *fp8_, save);
    else
      ops::linear_forward(out, x, w, bias, residual);
  }
  void backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x, const Tensor& w,
                const ops::Fp8SavedInput* saved = nullptr) const {
    if (fp8_)
      ops::linear_backward_fp8(dx, dw, dbias, dout, x, w, *fp8_, saved);
    else
      ops::linear_backward(dx, dw, dbias, dout, x, w);
  }

 private:
  std::optional<ops::Fp8Recipe> fp8_;
};

}  // namespace biofm
