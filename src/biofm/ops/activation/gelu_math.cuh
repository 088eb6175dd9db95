// The GELU formulas of the CUDA ops, one definition for the elementwise kernels
// (activation/cuda.cu), the fused GEMM's backward epilogue (gemm/gelu_fused_cuda.cu; its forward
// epilogue is CUTLASS's GELU with erff) and the FP8 quantization that computes the GELU on the
// way (fp8/cuda.cu). As the CPU reference (ops/cpu_kernels.cpp):
//   gelu_erf(x)  = ½x(1 + erf(x/√2)),            gelu_erf'(x)  = Φ(x) + x·φ(x)
//   gelu_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
// erf is the CPU reference's rational approximation (absolute error below 5e-7; relative to
// GELU's small negative tail, x < -3, up to 0.3%, against erff's 0.05%), evaluated with FMAs and
// the hardware reciprocal: branch-free, where CUDA's erff takes two polynomial branches that
// diverge inside a warp of activations. In the FP8 GELU quantization it was 6-19 us of a
// 142-222 us kernel (session 23); tanhf and expf stay CUDA's.
#pragma once
#include <cuda_runtime.h>

namespace biofm::ops::cuda::gelu_math {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1/sqrt(2π)
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kTanhCoef = 0.044715f;

// erf(x) = x·P(x²)/Q(x²) on [-4, 4] (the coefficients of Eigen and XLA), ±1 outside.
__host__ __device__ __forceinline__ float erf_rational(float x) {
  x = fminf(fmaxf(x, -4.0f), 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = fmaf(p, x2, 2.77068142495902e-08f);
  p = fmaf(p, x2, -2.10102402082508e-06f);
  p = fmaf(p, x2, -5.69250639462346e-05f);
  p = fmaf(p, x2, -7.34990630326855e-04f);
  p = fmaf(p, x2, -2.95459980854025e-03f);
  p = fmaf(p, x2, -1.60960333262415e-02f);
  float q = -1.45660718464996e-05f;
  q = fmaf(q, x2, -2.13374055278905e-04f);
  q = fmaf(q, x2, -1.68282697438203e-03f);
  q = fmaf(q, x2, -7.37332916720468e-03f);
  q = fmaf(q, x2, -1.42647390514189e-02f);
  // (q is in [-2.4, -0.014]: the approximate division is good to 2 ulp; |erf| <= 1 kept)
#ifdef __CUDA_ARCH__
  const float r = __fdividef(x * p, q);
#else
  const float r = x * p / q;
#endif
  return fminf(fmaxf(r, -1.0f), 1.0f);
}

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
