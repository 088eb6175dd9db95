// Scaled dot-product attention over a packed batch (THD layout).
//
// Sequence s occupies token rows [cu_seqlens[s], cu_seqlens[s] + seq_lens[s]); rows from
// there up to cu_seqlens[s+1] are padding (BSHD layout; none when packed). Tokens attend only
// within their own sequence (bidirectional, or causal when causal = true). Padding rows get
// zero output and zero gradients. GQA: query head h reads kv head h / (Hq / Hkv).
// cu_seqlens[0] must be 0 and cu_seqlens[B] <= N; rows from cu_seqlens[B] to N are padding.
// lse of padding rows is 0; an undefined lse in forward means "not wanted" (inference only:
// backward needs it). Backward recomputes the probabilities from q, k and lse.
//
// attention_decode: the incremental-decoding form (one sequence, forward only). The n_new
// query rows q[n_new, Hq, D] sit at absolute positions q_start_pos .. q_start_pos+n_new-1 and
// attend causally to a key/value cache k_cache, v_cache [capacity, Hkv, D] whose rows
// [0, cache_len) are filled (the new tokens' keys/values already appended): query row i sees
// cache rows 0 .. q_start_pos+i. Needs q_start_pos >= 0 and q_start_pos + n_new <= cache_len
// <= capacity. out [n_new, Hq, D]. q, caches and out share one dtype (F32 or BF16); the math
// is fp32. Same GQA rule; the CUDA version is asynchronous (no host sync).
#pragma once
#include <vector>

#include "biofm/ops/dispatch.h"

namespace biofm::ops {

struct AttentionShape {
  float scale = 1.0f;  // applied to q·k
  bool causal = false;
  int32_t max_seqlen = 0;  // longest seq_lens entry (a hint for the CUDA path)
  // The caller's promise that every sequence has exactly max_seqlen tokens and they lie back to
  // back (N == B·max_seqlen, cu_seqlens[s] = s·max_seqlen, no padding rows): the CUDA path may
  // then use dense kernels. Batch::uniform() says when it holds; ops.attention_check verifies it.
  bool uniform = false;
};

// q[N,Hq,D], k,v[N,Hkv,D] → out[N,Hq,D]; lse[N,Hq] (F32) = logsumexp of each query's scores.
void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
// dq, dk, dv overwritten.
void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
void attention_decode(Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      int64_t cache_len, int64_t q_start_pos, float scale);

// Attention read straight from a fused QKV projection's output, qkv[N, (Hq + 2·Hkv)·D] with
// each row q | k | v of one token (rope already applied in place, ops::rope_qk_packed): the
// same results as attention_forward / attention_backward on its q, k, v parts, without
// unpacking them. Backward writes dq | dk | dv into dqkv in the same layout (overwritten). On
// CUDA the cuDNN path reads (and writes) the packed rows through strides; the other paths work
// on unpacked copies.
struct QkvHeads {
  int64_t hq = 0, hkv = 0, head_dim = 0;
};
void attention_forward_packed(Tensor& out, Tensor& lse, const Tensor& qkv, const QkvHeads& heads,
                              const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
void attention_backward_packed(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const QkvHeads& heads,
                               const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                               const Tensor& seq_lens, const AttentionShape& a);

// Context parallelism: the attention of some of a batch's query rows (a rank's share of its
// group's batch, data/context_parallel.h) against all of the batch's keys and values. qkv [N, W]
// holds the batch's packed q | k | v rows (rope applied) as attention_forward_packed reads them;
// rows (I32 [T]) names the batch row each query row t stands for. Row t attends as batch row
// rows[t] does in attention_forward_packed (within its sequence; causally by position); a row
// past its sequence's end gets zero output and lse 0. out [T, Hq, D], lse [T, Hq].
// Backward: dq_rows [T, W] gets the share's dq in its q parts (k and v parts zeroed); dkv [N, W]
// gets the share's contributions to every batch row's dk and dv in its k and v parts (q parts
// zeroed): summed over a group's ranks they are the batch's dk, dv. CPU only for now.
void attention_forward_packed_rows(Tensor& out, Tensor& lse, const Tensor& qkv, const QkvHeads& heads,
                                   const Tensor& rows, const Tensor& cu_seqlens, const Tensor& seq_lens,
                                   const AttentionShape& a);
void attention_backward_packed_rows(Tensor& dq_rows, Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                                    const QkvHeads& heads, const Tensor& out, const Tensor& lse, const Tensor& rows,
                                    const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);

// The forward passes a caller will run next, one entry per batch, so that their start-up work
// overlaps computation: on the GPU the cuDNN graphs they need are built ahead, each on a thread of
// its own (a forward pass that needs one still being built waits for it); nothing on the CPU.
// Returns at once. packed_qkv: the batch's pass reads q, k, v from the fused projection's rows
// (attention_forward_packed); otherwise separate tensors (attention_forward).
struct AttentionBatch {
  int64_t sequences = 0, rows = 0;
  int32_t max_seqlen = 0;
  bool uniform = false;  // as AttentionShape::uniform
  bool packed_qkv = false;
};
void attention_prepare_forward(Device device, DType dtype, const std::vector<AttentionBatch>& batches,
                               const QkvHeads& heads, bool causal);

// ---- FP8 attention (the recipes' fp8_dpa) ----
// attention_forward / attention_backward with q, k, v, the output, the softmax probabilities
// and every gradient inside in FP8 E4M3 (on the GPU cuDNN's FP8 flash attention; on Hopper its
// backward takes head dim 128 only, and uniform batches only here: full windows). The outputs
// (out, dq, dk, dv) are handed back in the inputs' dtype; `saved` keeps the codes of q, k, v and
// out (U8, shaped like them) from forward for backward, so q, k, v themselves need not be kept.
// Per-tensor scales, E4M3's 448 over an amax:
//   q, k, v, dout: current scaling (their own amax, as fp8_quantize);
//   softmax probabilities (in [0, 1]): the fixed scale 448;
//   out: 448 / (2·amax(v)) (each output row is a convex combination of v's rows, so |out| <=
//   amax(v); the 2 covers the rounding of the probabilities);
//   dq, dk, dv and the score gradient dP, unknown before they exist: delayed scaling, 448 /
//   (4·amax) with amax the largest of the last kFp8AttentionHistory backwards of the same state
//   (two binades of headroom over it). A state's first backward (calibrate = true) has no such
//   amaxes: it runs the backward once to measure them (dP then scaled by its bound
//   2·D·amax(dout)·amax(v)) and again with the scales they give (those amaxes are not put in
//   the history; the second pass's are, by the next backward).
// state: F32 [kFp8AttentionSlots] on the op's device, all zeros to start (one per layer; slots
// below), updated in place; no host synchronisation. The CPU form is the reference: q, k, v and
// dout quantized as above, fp32 attention on the dequantized values, the outputs quantized with
// their scales (probabilities and dP are not quantized there, so the GPU's results differ from
// it by their rounding).
enum Fp8AttentionSlot : int64_t {
  kFa8QScaleInv, kFa8KScaleInv, kFa8VScaleInv, kFa8DoScaleInv,  // the inputs' (their quantization writes them)
  kFa8SScale, kFa8SScaleInv, kFa8OScale, kFa8OScaleInv,
  kFa8DqScale, kFa8DqScaleInv, kFa8DkScale, kFa8DkScaleInv, kFa8DvScale, kFa8DvScaleInv, kFa8DpScale, kFa8DpScaleInv,
  kFa8AmaxS, kFa8AmaxO, kFa8AmaxDq, kFa8AmaxDk, kFa8AmaxDv, kFa8AmaxDp,  // measured by the last forward / backward
  // The gradients' amax histories: kFa8History + i·kFp8AttentionHistory + j is entry j of
  // gradient i (dq, dk, dv, dP), a ring whose next entry is kFa8HistoryNext; each backward
  // first folds in the amaxes the one before it measured.
  kFa8HistoryNext,
  kFa8History,
};
constexpr int64_t kFp8AttentionHistory = 16;
constexpr int64_t kFa8SavedSlots = kFa8DqScale;  // q, k, v, dout scale_inv; S and O scales
constexpr int64_t kFp8AttentionSlots = kFa8History + 4 * kFp8AttentionHistory;
struct Fp8AttentionSaved {
  Tensor q, k, v, out;  // U8 codes [N, H, D]
  Tensor stats;         // F32, N·Hq softmax statistics in the backend's own layout
  // The state's slots [0, kFa8SavedSlots) as this forward left them (the scales of q, k, v and
  // out), put back by backward: another forward of the same layer in between (evaluation, a
  // pipeline schedule) cannot change the scales its codes are read with.
  Tensor scales;
};
void attention_forward_fp8(Tensor& out, Fp8AttentionSaved& saved, Tensor& state, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
void attention_backward_fp8(Tensor& dq, Tensor& dk, Tensor& dv, Tensor& state, const Tensor& dout,
                            const Fp8AttentionSaved& saved, const Tensor& cu_seqlens, const Tensor& seq_lens,
                            const AttentionShape& a, bool calibrate);

BIOFM_BACKENDS(attention_forward, attention_backward, attention_decode, attention_forward_packed,
               attention_backward_packed, attention_prepare_forward, attention_forward_packed_rows,
               attention_backward_packed_rows)
BIOFM_BACKENDS(attention_forward_fp8, attention_backward_fp8)
namespace cuda {
// How many attention_forward_fp8 calls have run on the GPU in this process (tests).
int64_t attention_fp8_calls();
}  // namespace cuda

}  // namespace biofm::ops
