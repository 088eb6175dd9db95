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
