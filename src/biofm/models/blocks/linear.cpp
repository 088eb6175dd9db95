#include "biofm/models/blocks/linear.h"

namespace biofm {

ParamRef::ParamRef(const ParamStore& store, const std::vector<std::string>& names) {
  if (names.empty()) return;
  (void)store.concat_shape(names);  // checks that the names are adjacent and stackable
  first_ = store.index(names[0]);
  count_ = names.size();
}

ops::Fp8WeightCodes* Linear::codes(const Tensor& w) const {
  // Only weights of the store: its version() is what says they changed.
  const ParamStore& p = *ctx_->params;
  if (w.device() != Device::CUDA || !p.owns(w.raw())) return nullptr;
  if (p.version() != codes_version_ || ctx_->fp8_epoch != codes_epoch_) {
    codes_ = ops::Fp8WeightCodes{};
    codes_version_ = p.version();
    codes_epoch_ = ctx_->fp8_epoch;
  }
  return &codes_;
}

void Linear::forward(Tensor& out, const Tensor& x, const Tensor& residual, ops::Fp8SavedInput* save,
                     const Tensor& x_amax) const {
  const Tensor w = weight(), b = b_.weight(*ctx_->params);
  if (fp8())
    ops::linear_forward_fp8(out, x, w, b, residual, *ctx_->fp8, save, x_amax, codes(w));
  else
    ops::linear_forward(out, x, w, b, residual);
}

void Linear::backward(Tensor& dx, const Tensor& dout, const Tensor& x, const ops::Fp8SavedInput* saved,
                      const Tensor& dout_amax) const {
  const ParamStore& p = *ctx_->params;
  const Tensor w = weight();
  Tensor dw = w_.grad(p), db = b_.grad(p);
  if (fp8())
    ops::linear_backward_fp8(dx, dw, db, dout, x, w, *ctx_->fp8, saved, dout_amax, codes(w));
  else
    ops::linear_backward(dx, dw, db, dout, x, w);
}

}  // namespace biofm
