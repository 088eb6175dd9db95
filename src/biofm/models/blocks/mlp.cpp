#include "biofm/models/blocks/mlp.h"

#include "biofm/ops/activation/op.h"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/options.h"

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

bool Mlp::gelu_writes_codes() const {
  return kind_ == MlpKind::Gelu && ops::op_options().fp8_gelu_codes && in_.takes_codes() && out_.takes_codes();
}

void Mlp::forward(Tensor* out, const Tensor& xn, const Tensor& residual, MlpActs& a, bool keep_fp8,
                  const Tensor& xn_amax, const ops::Fp8Codes* xn_codes) const {
  const int64_t T = xn_codes ? xn_codes->codes.size(0) : xn.size(0);
  const int64_t F = in_.weight().size(0);
  if (out && keep_fp8 && T > 0 && gelu_writes_codes()) {
    // DelayedScaling: W_out's input codes come straight from pre (the GELU computed inside the
    // quantization with W_out's delayed scale); the bf16 act is never stored, backward reads the
    // codes (fp8_out.replaces_x).
    a.pre = ctx_->act({T, F});
    in_.forward(a.pre, xn, Tensor(), &a.fp8_in, xn_amax, xn_codes);
    ops::Fp8Codes codes = ops::Fp8Codes::empty_for(T, F);
    ops::fp8_quantize_gelu(codes.codes, codes.codes_t, codes.scale_inv, a.pre, Tensor(), out_.producer_quant()->fwd,
                           out_.producer_scale_amax(0), out_.producer_record(0));
    *out = ctx_->act({T, residual.size(1)});
    out_.forward(*out, Tensor(), residual, &a.fp8_out, Tensor(), &codes);
    return;
  }
  if (fused_gelu()) {
    if (xn_codes) fail("Mlp::forward: input codes need an FP8 first linear");
    a.act = ctx_->act({T, F});
    if (a.keep_pre) a.pre = ctx_->act({T, F});
    ops::linear_gelu_forward(a.act, a.pre, xn, in_.weight(), in_.bias());
  } else {
    a.pre = ctx_->act({T, F});
    in_.forward(a.pre, xn, Tensor(), keep_fp8 ? &a.fp8_in : nullptr, xn_amax, xn_codes);
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
    // W_out's own gradients (no dx; queued first, so that on the side stream, ops.wgrad_stream,
    // they start beside the next GEMM); dpre from W_out's input-gradient GEMM with the GELU
    // backward in it; W_in's backward as usual.
    Tensor dpre = ctx_->act(a.pre.shape()), none;
    out_.backward(none, dout, a.act);
    ops::linear_dgelu_backward(dpre, dout, out_.weight(), a.pre);
    dxn = ctx_->act({T, xn.size(1)});
    in_.backward(dxn, dpre, xn);
    return;
  }
  Tensor dact = ctx_->act({T, out_.weight().size(1)});  // (act may have been dropped after forward)
  out_.backward(dact, dout, a.act, &a.fp8_out, dout_amax);
  if (T > 0 && gelu_writes_codes()) {
    // DelayedScaling: W_in's output-gradient codes (and its bias gradient) come straight from
    // dact and pre; the bf16 dpre is never stored.
    ops::Fp8Codes codes = ops::Fp8Codes::empty_for(T, a.pre.size(1));
    ops::fp8_quantize_gelu(codes.codes, codes.codes_t, codes.scale_inv, a.pre, dact, in_.producer_quant()->bwd,
                           in_.producer_scale_amax(2), in_.producer_record(2), in_.bias_grad());
    dact = Tensor();
    dxn = ctx_->act({T, in_.weight().size(1)});
    in_.backward(dxn, Tensor(), xn, &a.fp8_in, Tensor(), &codes);
    return;
  }
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
