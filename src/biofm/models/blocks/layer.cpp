#include "biofm/models/blocks/layer.h"

#include "biofm/core/profiling.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/options.h"

namespace biofm {

bool TransformerLayer::norm_writes_codes(const Norm& n, const Linear& consumer, const LayerActs& a,
                                         const Tensor& x) const {
  const ops::OpOptions& o = ops::op_options();
  return a.keep_fp8 && o.fp8_norm_codes && o.fp8_release_inputs && x.size(0) > 0 && consumer.takes_codes() &&
         n.can_write_codes(x);
}

void TransformerLayer::norm1(LayerActs& a, ops::Fp8Codes* codes) const {
  a.xn1_amax = Tensor();
  if (codes) {  // (max |xn1| goes straight into the q|k|v projection's amax history)
    const Linear& qkv = attn_.qkv();
    return norm1_.forward_codes(*codes, a.st1, a.x_in, qkv.producer_quant()->fwd, qkv.producer_scale_amax(0),
                                qkv.producer_record(0));
  }
  if (attn_.qkv().fp8()) a.xn1_amax = ctx_->f32({1});  // the q|k|v quantization reuses it
  norm1_.forward(a.xn1, a.st1, a.x_in, a.xn1_amax);
}

void TransformerLayer::norm2(LayerActs& a, ops::Fp8Codes* codes) const {
  a.xn2_amax = Tensor();
  if (codes) {
    const Linear& in = mlp_.in();
    return norm2_.forward_codes(*codes, a.st2, a.x_mid, in.producer_quant()->fwd, in.producer_scale_amax(0),
                                in.producer_record(0));
  }
  if (mlp_.in().fp8()) a.xn2_amax = ctx_->f32({1});  // the MLP's first quantization reuses it
  norm2_.forward(a.xn2, a.st2, a.x_mid, a.xn2_amax);
}

void TransformerLayer::forward(int layer, const Batch& b, const Tensor& x, LayerActs& a, Tensor* x_out,
                               KvCache* cache) const {
  a.x_in = x;
  if (!pre_norm_) {
    {
      NvtxRange r("attention forward");
      attn_.forward(a.h1, x, /*residual=*/x, b, a.attn, a.keep_fp8, Tensor(), cache, layer);
    }
    norm1_.forward(a.x_mid, a.st1, a.h1);
    // (recompute: the output is not wanted, but Norm2 backward reads h2, so the MLP runs whole)
    {
      NvtxRange r("mlp forward");
      mlp_.forward(&a.h2, a.x_mid, /*residual=*/a.x_mid, a.mlp, a.keep_fp8, Tensor());
    }
    Tensor out;
    norm2_.forward(out, a.st2, a.h2);
    if (x_out) *x_out = out;
    return;
  }
  // FP8: where a projection's kept codes replace its input (ops.fp8_release_inputs), the norm's
  // output is not read again (the norms' backward reads their inputs): dropped once used.
  // DelayedScaling: where the consumer takes codes, the norm writes them and xn is never stored.
  ops::Fp8Codes codes1, codes2;
  const bool c1 = norm_writes_codes(norm1_, attn_.qkv(), a, x);
  norm1(a, c1 ? &codes1 : nullptr);
  {
    NvtxRange r("attention forward");  // (the projections, rope and attention; the norms are outside)
    attn_.forward(a.x_mid, a.xn1, /*residual=*/x, b, a.attn, a.keep_fp8, a.xn1_amax, cache, layer,
                  c1 ? &codes1 : nullptr);
  }
  if (a.attn.fp8_qkv.replaces_x) a.xn1 = Tensor();
  const bool c2 = norm_writes_codes(norm2_, mlp_.in(), a, a.x_mid);
  norm2(a, c2 ? &codes2 : nullptr);
  {
    NvtxRange r("mlp forward");
    mlp_.forward(x_out, a.xn2, /*residual=*/a.x_mid, a.mlp, a.keep_fp8, a.xn2_amax, c2 ? &codes2 : nullptr);
  }
  if (a.mlp.fp8_in.replaces_x) a.xn2 = Tensor();
}

void TransformerLayer::backward_post_norm(int layer, const Batch& b, LayerActs& a, Tensor& dx) const {
  // Norm2, then the MLP; its input's gradient is the MLP's plus the residual's.
  Tensor dh2 = ctx_->act(dx.shape());
  norm2_.backward(dh2, dx, a.h2, a.st2);
  Tensor dmid;
  {
    NvtxRange r("mlp backward");
    mlp_.backward(dmid, dh2, a.x_mid, a.mlp);
  }
  ops::add_inplace(dmid, dh2);
  dh2 = Tensor();
  // Norm1, then attention, likewise.
  Tensor dh1 = ctx_->act(dx.shape());
  norm1_.backward(dh1, dmid, a.h1, a.st1);
  dmid = Tensor();
  {
    NvtxRange r("attention backward");
    attn_.backward(dx, dh1, a.x_in, b, a.attn);
  }
  ops::add_inplace(dx, dh1);
}

void TransformerLayer::backward(int layer, const Batch& b, LayerActs& a, Tensor& dx, Tensor* dx_amax,
                               bool emit_amax) const {
  const Tensor dout_amax = dx_amax ? *dx_amax : Tensor();
  if (dx_amax) *dx_amax = Tensor();
  if (a.recompute_pending()) {
    forward(layer, b, a.x_in, a, nullptr, nullptr);
  } else if (a.lean) {
    if (pre_norm_) {
      norm1(a);
      norm2(a);
    }
    mlp_.activate(a.mlp);
  }
  if (!pre_norm_) return backward_post_norm(layer, b, a, dx);
  // Mlp, then Norm2 with the residual gradient folded in. The norms' backward also write max
  // |dx| where an FP8 output projection quantizes that gradient next (this layer's attention
  // output, the layer below's MLP output).
  Tensor dxn2;
  {
    NvtxRange r("mlp backward");
    mlp_.backward(dxn2, dx, a.xn2, a.mlp, dout_amax);
  }
  Tensor dmid = ctx_->act(dx.shape()), dmid_amax;
  if (attn_.out().fp8()) dmid_amax = ctx_->f32({1});
  norm2_.backward(dmid, dxn2, a.x_mid, a.st2, /*dres=*/dx, dmid_amax);
  dxn2 = Tensor();
  // Attention, then Norm1 likewise.
  Tensor dxn1;
  {
    NvtxRange r("attention backward");
    attn_.backward(dxn1, dmid, a.xn1, b, a.attn, dmid_amax);
  }
  Tensor din_amax;
  if (dx_amax && emit_amax) din_amax = ctx_->f32({1});
  // Into a new buffer: the MLP's weight gradient may still be reading dx on the side stream.
  Tensor din = ctx_->act(dx.shape());
  norm1_.backward(din, dxn1, a.x_in, a.st1, /*dres=*/dmid, din_amax);
  dx = din;
  if (dx_amax) *dx_amax = din_amax;
}

}  // namespace biofm
