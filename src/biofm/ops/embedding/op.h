// Token embedding lookup, and ESM-2's token dropout.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

// out[N,C] = table[ids[n]] (ids I32 [N]). Ids outside [0, V) throw.
void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table);
// dtable[V,C] += scatter of dout[N,C] by ids.
void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids);

// ESM-2 token dropout, applied in place to the embeddings h[N,C] of a packed batch.
// For each sequence s (tokens cu_seqlens[s] .. cu_seqlens[s]+seq_lens[s]): rows whose id is
// mask_id become 0, and the sequence is scaled by (1 - 0.15*0.8) / (1 - n_mask/len).
// Slots past seq_lens[s] up to cu_seqlens[s+1] (padding in BSHD layout) become 0.
// scale_out[N] (F32) receives each row's factor (0 for zeroed rows), for backward.
// mask_id < 0 turns the dropout off: real rows keep factor 1, padding rows still become 0.
// Rows past cu_seqlens[B] (if the batch has any) count as padding. Backward of the whole
// step is scale_rows_inplace(dh, scale_out) followed by embedding_backward.
// The factor of a sequence of len tokens, n_mask of them mask tokens: (1 - 0.15·0.8) / (1 -
// n_mask/len), in double, rounded to fp32 (the CUDA kernel computes the same).
inline float esm_token_dropout_factor(int64_t n_mask, int64_t len) {
  const double train_ratio = 0.15 * 0.8;
  return float((1.0 - train_ratio) / (1.0 - double(n_mask) / double(len)));
}
void esm_token_dropout_forward(Tensor& h, Tensor& scale_out, const Tensor& ids,
                               const Tensor& cu_seqlens, const Tensor& seq_lens, int32_t mask_id);
// dh[N,C] *= scale (row-wise), in place.
void scale_rows_inplace(Tensor& dh, const Tensor& scale);

BIOFM_BACKENDS(embedding_forward, embedding_backward, esm_token_dropout_forward, scale_rows_inplace)

}  // namespace biofm::ops
