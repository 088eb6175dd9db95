#include "biofm/models/blocks/mlp.h"

#include "biofm/ops/activation/op.h"
#include "biofm/ops/gemm/op.h"

namespace biofm {

void Mlp::activate(MlpActs& a) const {
  const int64_t T = a.pre.size(0);
  if (kind_ == MlpKind::Gelu) {
    a.act = ctx_->act({T, a.pre.size(1)});
    if (out_.fp8()) a.act_amax = ctx_->f32({1});  // the W_out quantization reuses it
    ops::gelu_forward(a.act, a.pre, ops::GeluKind::Erf, a.act_amax);
  } else {
    a.act = ctx_->act({T, a.pre.size(1) / 2});
    if (out_.fp8()) a.act_amax = ctx_->f32({1});  // the W_out quantization reuses it
    ops::swiglu_forward_packed(a.act, a.pre, a.act_amax);
  }
}

void Mlp::forward(Tensor* out, const Tensor& xn, const Tensor& residual, MlpActs& a, bool keep_fp8,
                  const Tensor& xn_amax) const {
  const int64_t T = xn.size(0);
  const int64_t F = in_.weight().size(0);
  if (fused_gelu()) {
    a.act = ctx_->act({T, F});
    if (a.keep_pre) a.pre = ctx_->act({T, F});
    ops::linear_gelu_forward(a.act, a.pre, xn, in_.weight(), in_.bias());
  } else {
    a.pre = ctx_->act({T, F});
    in_.forward(a.pre, xn, Tensor(), keep_fp8 ? &a.fp8_in : nullptr, xn_amax);
    activate(a);
  }
  if (!out) return;
  *out = ctx_->act({T, residual.size(1)});
  out_.forward(*out, a.act, residual, keep_fp8 ? &a.fp8_out : nullptr, a.act_amax);
  if (a.fp8_out.replaces_x) a.act = Tensor();  // its codes serve backward (pre stays)
}

void Mlp::backward(Tensor& dxn, const Tensor& dout, const Tensor& xn, MlpActs& a, const Tensor& dout_amax) const {
  const int64_t T = dout.size(0);
  if (fused_gelu()) {
    // dpre from W_out's input-gradient GEMM with the GELU backward in it; then W_out's own
    // gradients (no dx), and W_in's backward as usual.
    Tensor dpre = ctx_->act(a.pre.shape()), none;
    ops::linear_dgelu_backward(dpre, dout, out_.weight(), a.pre);
    out_.backward(none, dout, a.act);
    dxn = ctx_->act({T, xn.size(1)});
    in_.backward(dxn, dpre, xn);
    return;
  }
  Tensor dact = ctx_->act({T, out_.weight().size(1)});  // (act may have been dropped after forward)
  out_.backward(dact, dout, a.act, &a.fp8_out, dout_amax);
  Tensor dpre, dpre_amax;
  if (in_.fp8()) dpre_amax = ctx_->f32({1});  // the W_in gradient quantization reuses it
  if (kind_ == MlpKind::Gelu) {
    ops::gelu_backward(dact, dact, a.pre, ops::GeluKind::Erf, dpre_amax);
    dpre = dact;
  } else {
    dpre = ctx_->act(a.pre.shape());
    ops::swiglu_backward_packed(dpre, dact, a.pre, dpre_amax);
  }
  dact = Tensor();
  dxn = ctx_->act({T, in_.weight().size(1)});  // (xn may have been dropped after forward)
  in_.backward(dxn, dpre, xn, &a.fp8_in, dpre_amax);
}

}  // namespace biofm
