// The rotary embedding's arithmetic on the GPU, shared by the rope kernels and the FP8
// quantization that applies the gradient's inverse rotation on the way (fp8_quantize_rope_grad),
// so that both round every value the same way.
#pragma once
#include <cuda_runtime.h>

namespace biofm::ops::rope_math {

// cos / sin of the angle position · inv_freq_i: the angle in fp32 (as Hugging Face), its cos /
// sin in double (as the CPU reference rounds them); sin negated for the inverse rotation.
__device__ __forceinline__ void angle(float& c, float& s, float position, float inv_freq_i, bool inverse) {
  const float a = position * inv_freq_i;
  double sd, cd;
  sincos(double(a), &sd, &cd);
  c = float(cd);
  s = inverse ? -float(sd) : float(sd);
}

// The rotated pair (x1 = x[i], x2 = x[i + D/2]), each with one fused multiply-add after a
// rounded product (written out, so that no compiler contraction makes two kernels differ):
//   y1 = x1·c - x2·s,   y2 = x2·c + x1·s.
__device__ __forceinline__ float rotated_first(float x1, float x2, float c, float s) {
  return fmaf(x1, c, -__fmul_rn(x2, s));
}
__device__ __forceinline__ float rotated_second(float x1, float x2, float c, float s) {
  return fmaf(x2, c, __fmul_rn(x1, s));
}

}  // namespace biofm::ops::rope_math
