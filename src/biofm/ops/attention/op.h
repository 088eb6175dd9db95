// Scaled dot-product attention over a packed batch (THD layout).
//
// Sequence s occupies token rows [cu_seqlens[s], cu_seqlens[s] + seq_lens[s]); rows from
// there up to cu_seqlens[s+1] are padding (BSHD layout; none when packed). Tokens attend only
// within their own sequence (bidirectional, or causal when causal = true). Padding rows get
// zero output and zero gradients. GQA: query head h reads kv head h / (Hq / Hkv).
// cu_seqlens[0] must be 0 and cu_seqlens[B] <= N; rows from cu_seqlens[B] to N are padding.
// lse of padding rows is 0; an undefined lse in forward means "not wanted" (inference only:
// backward needs it). Backward recomputes the probabilities from q, k and lse.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

struct AttentionShape {
  float scale = 1.0f;  // applied to q·k
  bool causal = false;
  int32_t max_seqlen = 0;  // longest seq_lens entry (a hint for the CUDA path)
};

// q[N,Hq,D], k,v[N,Hkv,D] → out[N,Hq,D]; lse[N,Hq] (F32) = logsumexp of each query's scores.
void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
// dq, dk, dv overwritten.
void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);

namespace cpu {
void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
}  // namespace cpu
namespace cuda {
void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);
}  // namespace cuda

inline void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& cu_seqlens, const Tensor& seq_lens,
                              const AttentionShape& a) {
  BIOFM_DISPATCH(q.device(), attention_forward, out, lse, q, k, v, cu_seqlens, seq_lens, a);
}
inline void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                               const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                               const Tensor& seq_lens, const AttentionShape& a) {
  BIOFM_DISPATCH(q.device(), attention_backward, dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens,
                 seq_lens, a);
}

}  // namespace biofm::ops
