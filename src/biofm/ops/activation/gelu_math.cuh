// The GELU formulas of the CUDA ops, one definition for the elementwise kernels
// (activation/cuda.cu) and the GEMM epilogues (gemm/gelu_fused_cuda.cu). As the CPU reference
// (ops/cpu_kernels.cpp), with CUDA's accurate erff / tanhf / expf:
//   gelu_erf(x)  = ½x(1 + erf(x/√2)),            gelu_erf'(x)  = Φ(x) + x·φ(x)
//   gelu_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
#pragma once
#include <cuda_runtime.h>

namespace biofm::ops::cuda::gelu_math {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1/sqrt(2π)
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kTanhCoef = 0.044715f;

__host__ __device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }
__host__ __device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kTanhCoef * x * x * x)));
}
__host__ __device__ __forceinline__ float gelu_erf_grad(float x) {
  return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}
__host__ __device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float x2 = x * x;
  const float t = tanhf(kSqrt2OverPi * (x + kTanhCoef * x2 * x));
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kTanhCoef * x2);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace biofm::ops::cuda::gelu_math
