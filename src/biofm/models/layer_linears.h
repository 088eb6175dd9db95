// The transformer layers' linear projections (q|k|v, o, MLP in and out), in the compute
// precision or, with fp8_config enabled, as FP8 GEMMs (ops/gemm/op.h). The embedding and the
// LM head stay in the compute precision, as in the recipes (Transformer Engine's FP8 covers
// the layers' Linear modules only).
#pragma once
#include <optional>
#include <unordered_map>

#include "biofm/models/params.h"
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
  // params: the store the weights come from; its version() tells when the cached FP8 codes of
  // the weights (kept across the micro batches of an optimizer step) are stale.
  void set_fp8(std::optional<ops::Fp8Recipe> recipe, const ParamStore* params) {
    fp8_ = recipe;
    params_ = params;
    weight_codes_.clear();
  }
  bool fp8() const { return fp8_.has_value(); }

  // save / saved: where FP8 keeps the input's transposed codes from forward for backward
  // (null: backward quantizes x again); x_amax / dout_amax: max |x| / |dout| from their
  // producer (skips a pass). Unused without FP8.
  void forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual = Tensor(),
               ops::Fp8SavedInput* save = nullptr, const Tensor& x_amax = Tensor()) const {
    if (fp8_)
      ops::linear_forward_fp8(out, x, w, bias, residual, *fp8_, save, x_amax, codes_of(w));
    else
      ops::linear_forward(out, x, w, bias, residual);
  }
  void backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x, const Tensor& w,
                const ops::Fp8SavedInput* saved = nullptr, const Tensor& dout_amax = Tensor()) const {
    if (fp8_)
      ops::linear_backward_fp8(dx, dw, dbias, dout, x, w, *fp8_, saved, dout_amax, codes_of(w));
    else
      ops::linear_backward(dx, dw, dbias, dout, x, w);
  }

 private:
  // The cache slot of weight w (by its address), emptied whenever the parameters changed.
  ops::Fp8WeightCodes* codes_of(const Tensor& w) const {
    // Only weights of the store: its version() is what says they changed.
    if (!params_ || w.device() != Device::CUDA || !params_->owns(w.raw())) return nullptr;
    if (params_->version() != codes_version_) {
      weight_codes_.clear();
      codes_version_ = params_->version();
    }
    return &weight_codes_[w.raw()];
  }

  std::optional<ops::Fp8Recipe> fp8_;
  const ParamStore* params_ = nullptr;
  mutable std::unordered_map<const void*, ops::Fp8WeightCodes> weight_codes_;
  mutable uint64_t codes_version_ = 0;
};

}  // namespace biofm
