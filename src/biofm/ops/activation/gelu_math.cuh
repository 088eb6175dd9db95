// The GELU formulas of the CUDA ops, one definition for the elementwise kernels
// (activation/cuda.cu), the fused GEMM's backward epilogue (gemm/gelu_fused_cuda.cu; its forward
// epilogue is CUTLASS's GELU with erff) and the FP8 quantization that computes the GELU on the
// way (fp8/cuda.cu). As the CPU reference (ops/cpu_kernels.cpp):
//   gelu_erf(x)  = ½x(1 + erf(x/√2)),            gelu_erf'(x)  = Φ(x) + x·φ(x)
//   gelu_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
// erf is the CPU reference's rational approximation (erf_rational.h; absolute error below 5e-7;
// relative to GELU's small negative tail, x < -3, up to 0.3%, against erff's 0.05%):
// branch-free, where CUDA's erff takes two polynomial branches that diverge inside a warp. In the FP8 GELU quantization it was 6-19 us of a
// 142-222 us kernel (session 23); tanhf and expf stay CUDA's.
#pragma once
#include <cuda_runtime.h>

#include "biofm/ops/activation/erf_rational.h"

namespace biofm::ops::cuda::gelu_math {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1/sqrt(2π)
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kTanhCoef = 0.044715f;

__host__ __device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erf_rational(x * kInvSqrt2)); }
__host__ __device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kTanhCoef * x * x * x)));
}
__host__ __device__ __forceinline__ float gelu_erf_grad(float x) {
  return 0.5f * (1.0f + erf_rational(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}
__host__ __device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float x2 = x * x;
  const float t = tanhf(kSqrt2OverPi * (x + kTanhCoef * x2 * x));
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kTanhCoef * x2);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace biofm::ops::cuda::gelu_math
