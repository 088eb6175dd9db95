// Device helpers shared by the kernels that write FP8 codes with a per-tensor scale
// (fp8/cuda.cu's quantization, the norms' FP8 output in norm/cuda.cu).
#pragma once
#include <cuda_fp8.h>

#include "biofm/ops/fp8/op.h"

namespace biofm::ops::cuda::fp8_codes {

// Finite values round to nearest even and saturate; ±inf and NaN give the NaN code, so that an
// overflow upstream reaches the loss (and the trainer's non-finite check) instead of being clamped.
template <Fp8Type kType>
__device__ __forceinline__ uint8_t encode(float v) {
  if (!isfinite(v)) return 0x7f;
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, kType == Fp8Type::E4M3 ? __NV_E4M3 : __NV_E5M2);
}

// scale = fmax / amax, or 1 where amax is 0 or not finite (fp8_scale_for on the device); an
// overflowing quotient saturates to FLT_MAX.
__device__ __forceinline__ float scale_for(float amax, float fmax) {
  float scale = 1.0f;
  if (amax > 0.0f && isfinite(amax)) {
    scale = fmax / amax;
    if (!isfinite(scale)) scale = 3.402823466e38f;
  }
  return scale;
}

}  // namespace biofm::ops::cuda::fp8_codes
