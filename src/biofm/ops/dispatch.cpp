// The public ops' definitions: each picks the backend from the device of one of its tensors
// (BIOFM_DISPATCH). Their declarations, with the documentation and default arguments, are in
// the families' op.h; BIOFM_BACKENDS declares the cpu:: and cuda:: versions from them.
#include "biofm/ops/activation/op.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/embedding/op.h"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/loss/op.h"
#include "biofm/ops/norm/op.h"
#include "biofm/ops/optim/op.h"
#include "biofm/ops/rope/op.h"

namespace biofm::ops {

// ---- gemm

void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual) {
  BIOFM_DISPATCH(x.device(), linear_forward, out, x, w, bias, residual);
}
void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout,
                     const Tensor& x, const Tensor& w) {
  BIOFM_DISPATCH(x.device(), linear_backward, dx, dw, dbias, dout, x, w);
}
void linear_gelu_forward(Tensor& act, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias) {
  BIOFM_DISPATCH(x.device(), linear_gelu_forward, act, pre, x, w, bias);
}
void linear_dgelu_backward(Tensor& dpre, const Tensor& dout, const Tensor& w, const Tensor& pre) {
  BIOFM_DISPATCH(dout.device(), linear_dgelu_backward, dpre, dout, w, pre);
}
void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                        const Tensor& residual, const Fp8Recipe& recipe, Fp8SavedInput* save,
                        const Tensor& x_amax, Fp8WeightCodes* w_codes, const Fp8Codes* x_codes) {
  BIOFM_DISPATCH(w.device(), linear_forward_fp8, out, x, w, bias, residual, recipe, save, x_amax, w_codes, x_codes);
}
void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& w, const Fp8Recipe& recipe, const Fp8SavedInput* saved,
                         const Tensor& dout_amax, const Fp8WeightCodes* w_codes, const Fp8Codes* dout_codes) {
  BIOFM_DISPATCH(w.device(), linear_backward_fp8, dx, dw, dbias, dout, x, w, recipe, saved, dout_amax, w_codes,
                 dout_codes);
}
void linear_forward_fp8_block(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                              const Tensor& residual, const Fp8BlockRecipe& recipe, Fp8SavedInput* save,
                              Fp8WeightCodes* w_codes) {
  BIOFM_DISPATCH(x.device(), linear_forward_fp8_block, out, x, w, bias, residual, recipe, save, w_codes);
}
void linear_backward_fp8_block(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Fp8BlockRecipe& recipe, const Fp8SavedInput* saved,
                               const Fp8WeightCodes* w_codes) {
  BIOFM_DISPATCH(x.device(), linear_backward_fp8_block, dx, dw, dbias, dout, x, w, recipe, saved, w_codes);
}

// ---- norm

void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, float eps, const Tensor& out_amax) {
  BIOFM_DISPATCH(x.device(), layernorm_forward, out, mean, rstd, x, w, b, eps, out_amax);
}
void layernorm_backward(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout,
                        const Tensor& x, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dres, const Tensor& dx_amax) {
  BIOFM_DISPATCH(x.device(), layernorm_backward, dx, dw, db, dout, x, w, mean, rstd, dres, dx_amax);
}
void rmsnorm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& w, float eps,
                     const Tensor& out_amax) {
  BIOFM_DISPATCH(x.device(), rmsnorm_forward, out, rstd, x, w, eps, out_amax);
}
void rmsnorm_backward(Tensor& dx, Tensor& dw, const Tensor& dout, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, const Tensor& dres, const Tensor& dx_amax) {
  BIOFM_DISPATCH(x.device(), rmsnorm_backward, dx, dw, dout, x, w, rstd, dres, dx_amax);
}
void layernorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& mean, Tensor& rstd, const Tensor& x,
                           const Tensor& w, const Tensor& b, float eps, Fp8Type t, const Tensor& amax,
                           const Tensor& record) {
  BIOFM_DISPATCH(x.device(), layernorm_forward_fp8, q, q_t, scale_inv, mean, rstd, x, w, b, eps, t, amax, record);
}
void rmsnorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& rstd, const Tensor& x, const Tensor& w,
                         float eps, Fp8Type t, const Tensor& amax, const Tensor& record) {
  BIOFM_DISPATCH(x.device(), rmsnorm_forward_fp8, q, q_t, scale_inv, rstd, x, w, eps, t, amax, record);
}

// ---- elementwise

void add_inplace(Tensor& y, const Tensor& x) { BIOFM_DISPATCH(y.device(), add_inplace, y, x); }
void cast(Tensor& dst, const Tensor& src) { BIOFM_DISPATCH(src.device(), cast, dst, src); }
void sum_accumulate(Tensor& acc, const Tensor& x) {
  BIOFM_DISPATCH(x.device(), sum_accumulate, acc, x);
}

// ---- activation

void gelu_forward(Tensor& out, const Tensor& x, GeluKind kind, const Tensor& out_amax) {
  BIOFM_DISPATCH(x.device(), gelu_forward, out, x, kind, out_amax);
}
void gelu_backward(Tensor& dx, const Tensor& dout, const Tensor& x, GeluKind kind, const Tensor& dx_amax) {
  BIOFM_DISPATCH(x.device(), gelu_backward, dx, dout, x, kind, dx_amax);
}
void swiglu_forward(Tensor& out, const Tensor& gate, const Tensor& up) {
  BIOFM_DISPATCH(gate.device(), swiglu_forward, out, gate, up);
}
void swiglu_backward(Tensor& dgate, Tensor& dup, const Tensor& dout, const Tensor& gate,
                     const Tensor& up) {
  BIOFM_DISPATCH(gate.device(), swiglu_backward, dgate, dup, dout, gate, up);
}
void swiglu_forward_packed(Tensor& out, const Tensor& gate_up, const Tensor& out_amax) {
  BIOFM_DISPATCH(gate_up.device(), swiglu_forward_packed, out, gate_up, out_amax);
}
void swiglu_backward_packed(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up,
                            const Tensor& dgate_up_amax) {
  BIOFM_DISPATCH(gate_up.device(), swiglu_backward_packed, dgate_up, dout, gate_up, dgate_up_amax);
}

// ---- attention

void attention_prepare_forward(Device device, DType dtype, const std::vector<AttentionBatch>& batches,
                               const QkvHeads& heads, bool causal) {
  BIOFM_DISPATCH(device, attention_prepare_forward, device, dtype, batches, heads, causal);
}
void attention_forward_packed(Tensor& out, Tensor& lse, const Tensor& qkv, const QkvHeads& heads,
                              const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  BIOFM_DISPATCH(qkv.device(), attention_forward_packed, out, lse, qkv, heads, cu_seqlens, seq_lens, a);
}
void attention_forward_packed_rows(Tensor& out, Tensor& lse, const Tensor& qkv, const QkvHeads& heads,
                                   const Tensor& rows, const Tensor& cu_seqlens, const Tensor& seq_lens,
                                   const AttentionShape& a) {
  BIOFM_DISPATCH(qkv.device(), attention_forward_packed_rows, out, lse, qkv, heads, rows, cu_seqlens, seq_lens, a);
}
void attention_backward_packed_rows(Tensor& dq_rows, Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                                    const QkvHeads& heads, const Tensor& out, const Tensor& lse, const Tensor& rows,
                                    const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  BIOFM_DISPATCH(qkv.device(), attention_backward_packed_rows, dq_rows, dkv, dout, qkv, heads, out, lse, rows,
                 cu_seqlens, seq_lens, a);
}
void attention_backward_packed(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const QkvHeads& heads,
                               const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                               const Tensor& seq_lens, const AttentionShape& a) {
  BIOFM_DISPATCH(qkv.device(), attention_backward_packed, dqkv, dout, qkv, heads, out, lse, cu_seqlens, seq_lens,
                 a);
}
void attention_forward_fp8(Tensor& out, Fp8AttentionSaved& saved, Tensor& state, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  BIOFM_DISPATCH(q.device(), attention_forward_fp8, out, saved, state, q, k, v, cu_seqlens, seq_lens, a);
}
void attention_backward_fp8(Tensor& dq, Tensor& dk, Tensor& dv, Tensor& state, const Tensor& dout,
                            const Fp8AttentionSaved& saved, const Tensor& cu_seqlens, const Tensor& seq_lens,
                            const AttentionShape& a, bool calibrate) {
  BIOFM_DISPATCH(dout.device(), attention_backward_fp8, dq, dk, dv, state, dout, saved, cu_seqlens, seq_lens, a,
                 calibrate);
}
void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& cu_seqlens, const Tensor& seq_lens,
                       const AttentionShape& a) {
  BIOFM_DISPATCH(q.device(), attention_forward, out, lse, q, k, v, cu_seqlens, seq_lens, a);
}
void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                        const Tensor& seq_lens, const AttentionShape& a) {
  BIOFM_DISPATCH(q.device(), attention_backward, dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens,
          seq_lens, a);
}
void attention_decode(Tensor& out, const Tensor& q, const Tensor& k_cache,
                      const Tensor& v_cache, int64_t cache_len, int64_t q_start_pos,
                      float scale) {
  BIOFM_DISPATCH(q.device(), attention_decode, out, q, k_cache, v_cache, cache_len, q_start_pos,
          scale);
}

// ---- embedding

void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table) {
  BIOFM_DISPATCH(table.device(), embedding_forward, out, ids, table);
}
void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  BIOFM_DISPATCH(dout.device(), embedding_backward, dtable, dout, ids);
}
void esm_token_dropout_forward(Tensor& h, Tensor& scale_out, const Tensor& ids,
                               const Tensor& cu_seqlens, const Tensor& seq_lens,
                               int32_t mask_id) {
  BIOFM_DISPATCH(h.device(), esm_token_dropout_forward, h, scale_out, ids, cu_seqlens, seq_lens,
          mask_id);
}
void scale_rows_inplace(Tensor& dh, const Tensor& scale) {
  BIOFM_DISPATCH(dh.device(), scale_rows_inplace, dh, scale);
}

// ---- fp8

void fp8_quantize(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& x, Fp8Type t,
                  const Tensor& amax, const Tensor& col_sums, const Tensor& record) {
  BIOFM_DISPATCH(x.device(), fp8_quantize, q, q_t, scale_inv, x, t, amax, col_sums, record);
}
void fp8_dequantize_transposed(Tensor& x, const Tensor& q_t, const Tensor& scale_inv, Fp8Type t) {
  BIOFM_DISPATCH(x.device(), fp8_dequantize_transposed, x, q_t, scale_inv, t);
}
void fp8_dequantize(Tensor& x, const Tensor& q, const Tensor& scale_inv, Fp8Type t) {
  BIOFM_DISPATCH(x.device(), fp8_dequantize, x, q, scale_inv, t);
}

// ---- loss

void count_labels_accumulate(Tensor& count, const Tensor& labels) {
  BIOFM_DISPATCH(labels.device(), count_labels_accumulate, count, labels);
}
void cross_entropy_forward_backward(Tensor& token_loss, Tensor& dlogits,
                                    const Tensor& logits, const Tensor& labels,
                                    float grad_scale) {
  BIOFM_DISPATCH(logits.device(), cross_entropy_forward_backward, token_loss, dlogits, logits,
          labels, grad_scale);
}

// ---- optim

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                const AdamWHyper& h) {
  BIOFM_DISPATCH(param.device(), adamw_step, param, grad, m, v, h);
}
void sum_squares_accumulate(Tensor& acc, const Tensor& g) {
  BIOFM_DISPATCH(g.device(), sum_squares_accumulate, acc, g);
}
void scale_inplace(Tensor& g, float factor) {
  BIOFM_DISPATCH(g.device(), scale_inplace, g, factor);
}
void grad_norm_clip_coef(Tensor& norm, Tensor& clip_coef, const Tensor& grad,
                         float max_norm, const Tensor& grad_divisor) {
  BIOFM_DISPATCH(grad.device(), grad_norm_clip_coef, norm, clip_coef, grad, max_norm, grad_divisor);
}
void adamw_flat(Tensor& param, Tensor& compute_copy, const Tensor& grad, Tensor& m,
                Tensor& v, const Tensor& decay_ranges, const Tensor& clip_coef,
                const AdamWHyper& h) {
  BIOFM_DISPATCH(param.device(), adamw_flat, param, compute_copy, grad, m, v, decay_ranges,
          clip_coef, h);
}

// ---- rope

void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) {
  BIOFM_DISPATCH(x.device(), rope_apply, x, positions, inv_freq, inverse);
}
void rope_unpack_qkv(Tensor& q, Tensor& k, Tensor& v, const Tensor& packed, const Tensor& positions,
                     const Tensor& inv_freq) {
  BIOFM_DISPATCH(packed.device(), rope_unpack_qkv, q, k, v, packed, positions, inv_freq);
}
void rope_pack_qkv_grad(Tensor& dpacked, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        const Tensor& positions, const Tensor& inv_freq) {
  BIOFM_DISPATCH(dq.device(), rope_pack_qkv_grad, dpacked, dq, dk, dv, positions, inv_freq);
}
void rope_qk_packed(Tensor& qkv, const Tensor& positions, const Tensor& inv_freq, int64_t hq, int64_t hkv,
                    bool inverse, const Tensor& amax) {
  BIOFM_DISPATCH(qkv.device(), rope_qk_packed, qkv, positions, inv_freq, hq, hkv, inverse, amax);
}

}  // namespace biofm::ops
