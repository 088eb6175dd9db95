// Rotary position embedding, rotate-half form (Hugging Face ESM-2 and Llama).
// For head vector x of size D and frequency i < D/2 at position p, with a = p·inv_freq[i]:
//   y[i]       = x[i]·cos a - x[i+D/2]·sin a
//   y[i+D/2]   = x[i+D/2]·cos a + x[i]·sin a
// Backward is the inverse rotation of the gradient (inverse = true).
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

// x[N,H,D] rotated in place; positions[N] I32; inv_freq[D/2] F32.
void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse);

// Fused QKV projection: one GEMM against the concatenated q/k/v weights gives
// packed[N, (Hq + 2·Hkv)·D], each row q | k | v of one token.
// Forward: q[N,Hq,D] = rope(q part), k[N,Hkv,D] = rope(k part), v[N,Hkv,D] = v part.
void rope_unpack_qkv(Tensor& q, Tensor& k, Tensor& v, const Tensor& packed, const Tensor& positions,
                     const Tensor& inv_freq);
// Backward: dpacked = rope⁻¹(dq) | rope⁻¹(dk) | dv (overwritten).
void rope_pack_qkv_grad(Tensor& dpacked, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        const Tensor& positions, const Tensor& inv_freq);

// The same rotation in place on the fused projection's output, left packed:
// qkv[N, (hq + 2·hkv)·D], each row q | k | v; the hq query heads and hkv key heads of every row
// are rotated (inverse: the gradient's backward rotation), the value heads untouched. amax, when
// defined (F32 [1]), is set to max |qkv| over whole rows after the rotation (the value heads
// read for it): the FP8 quantization of dq|dk|dv then skips its own pass.
void rope_qk_packed(Tensor& qkv, const Tensor& positions, const Tensor& inv_freq, int64_t hq, int64_t hkv,
                    bool inverse, const Tensor& amax = Tensor());

BIOFM_BACKENDS(rope_apply, rope_unpack_qkv, rope_pack_qkv_grad, rope_qk_packed)

}  // namespace biofm::ops
