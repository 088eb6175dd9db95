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

namespace cpu {
void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse);
}
namespace cuda {
void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse);
}

inline void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) {
  BIOFM_DISPATCH(x.device(), rope_apply, x, positions, inv_freq, inverse);
}

}  // namespace biofm::ops
