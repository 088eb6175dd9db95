#include "biofm/models/blocks/embedding_head.h"

#include "biofm/ops/activation/op.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/embedding/op.h"

namespace biofm {

Tensor TokenEmbedding::forward(const Batch& b, Acts& a) const {
  const ParamStore& p = *ctx_->params;
  const Tensor table = table_.weight(p);
  Tensor x = ctx_->act({b.num_rows(), table.size(1)});
  ops::embedding_forward(x, b.input_ids, table);
  if (esm_rescale_ && b.cp) {
    // A context-parallel share holds parts of sequences: the factors come from whole ones.
    a.row_scale = b.cp->token_dropout_scale;
    ops::scale_rows_inplace(x, a.row_scale);
  } else if (esm_rescale_) {
    a.row_scale = ctx_->f32({b.num_rows()});
    ops::esm_token_dropout_forward(x, a.row_scale, b.input_ids, b.cu_seqlens, b.seq_lens, mask_token_id_);
  }
  if (positions_.defined()) {
    Tensor pos = ctx_->act(x.shape());
    ops::embedding_forward(pos, b.positions, positions_.weight(p));
    ops::add_inplace(x, pos);
  }
  if (!has_norm_) return x;
  a.sum = x;
  Tensor out;
  norm_.forward(out, a.norm, a.sum);
  return out;
}

void TokenEmbedding::backward(Tensor& dx, const Batch& b, const Acts& a) const {
  const ParamStore& p = *ctx_->params;
  if (has_norm_) {
    Tensor dsum = ctx_->act(dx.shape());
    norm_.backward(dsum, dx, a.sum, a.norm);
    dx = dsum;
  }
  if (positions_.defined()) {
    Tensor g = positions_.grad(p);
    ops::embedding_backward(g, dx, b.positions);
  }
  if (esm_rescale_) ops::scale_rows_inplace(dx, a.row_scale);
  Tensor g = table_.grad(p);
  ops::embedding_backward(g, dx, b.input_ids);
}

Tensor LmHead::forward(const Tensor& h, HeadActs& a) const {
  const int64_t T = h.size(0);
  const Tensor* x = &h;
  if (has_transform_) {
    a.dense = ctx_->act({T, h.size(1)});
    dense_.forward(a.dense, h);
    a.act = ctx_->act(a.dense.shape());
    ops::gelu_forward(a.act, a.dense, ops::GeluKind::Erf);
    norm_.forward(a.out, a.norm, a.act);
    x = &a.out;
  }
  Tensor logits = ctx_->act({T, decoder_.weight().size(0)});
  decoder_.forward(logits, *x);
  return logits;
}

void LmHead::backward(Tensor& dh, const Tensor& dlogits, const Tensor& h, HeadActs& a) const {
  const int64_t T = dlogits.size(0), H = h.size(1);
  if (!has_transform_) {
    dh = ctx_->act({T, H});
    decoder_.backward(dh, dlogits, h);
    return;
  }
  Tensor dout = ctx_->act({T, H});
  decoder_.backward(dout, dlogits, a.out);
  Tensor dact = ctx_->act({T, H});
  norm_.backward(dact, dout, a.act, a.norm);
  ops::gelu_backward(dact, dact, a.dense, ops::GeluKind::Erf);
  dh = ctx_->act({T, H});
  dense_.backward(dh, dact, h);
}

}  // namespace biofm
