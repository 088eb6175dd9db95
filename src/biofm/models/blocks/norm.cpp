#include "biofm/models/blocks/norm.h"

#include "biofm/ops/norm/op.h"

namespace biofm {

void Norm::forward(Tensor& out, NormStats& st, const Tensor& x, const Tensor& out_amax) const {
  const ParamStore& p = *ctx_->params;
  const int64_t T = x.size(0);
  out = ctx_->act(x.shape());
  if (!st.rstd.defined()) st.rstd = ctx_->f32({T});
  if (kind_ == NormKind::LayerNorm) {
    if (!st.mean.defined()) st.mean = ctx_->f32({T});
    ops::layernorm_forward(out, st.mean, st.rstd, x, w_.weight(p), b_.weight(p), eps_, out_amax);
  } else {
    ops::rmsnorm_forward(out, st.rstd, x, w_.weight(p), eps_, out_amax);
  }
}

bool Norm::can_write_codes(const Tensor& x) const {
  const ParamStore& p = *ctx_->params;
  return x.device() == Device::CUDA && x.dim() == 2 && x.size(1) % 16 == 0 && aligned16(x) &&
         aligned16(w_.weight(p)) && (kind_ != NormKind::LayerNorm || aligned16(b_.weight(p)));
}

void Norm::forward_codes(ops::Fp8Codes& codes, NormStats& st, const Tensor& x, ops::Fp8Type t,
                         const Tensor& scale_amax, const Tensor& record) const {
  const ParamStore& p = *ctx_->params;
  const int64_t T = x.size(0);
  codes = ops::Fp8Codes::empty_for(T, x.size(1));
  if (!st.rstd.defined()) st.rstd = ctx_->f32({T});
  if (kind_ == NormKind::LayerNorm) {
    if (!st.mean.defined()) st.mean = ctx_->f32({T});
    ops::layernorm_forward_fp8(codes.codes, codes.codes_t, codes.scale_inv, st.mean, st.rstd, x, w_.weight(p),
                               b_.weight(p), eps_, t, scale_amax, record);
  } else {
    ops::rmsnorm_forward_fp8(codes.codes, codes.codes_t, codes.scale_inv, st.rstd, x, w_.weight(p), eps_, t,
                             scale_amax, record);
  }
}

void Norm::backward(Tensor& dx, const Tensor& dout, const Tensor& x, const NormStats& st, const Tensor& dres,
                    const Tensor& dx_amax) const {
  const ParamStore& p = *ctx_->params;
  Tensor dw = w_.grad(p);
  if (kind_ == NormKind::LayerNorm) {
    Tensor db = b_.grad(p);
    ops::layernorm_backward(dx, dw, db, dout, x, w_.weight(p), st.mean, st.rstd, dres, dx_amax);
  } else {
    ops::rmsnorm_backward(dx, dw, dout, x, w_.weight(p), st.rstd, dres, dx_amax);
  }
}

}  // namespace biofm
