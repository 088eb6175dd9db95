// erf(x) by the rational minimax approximation of Eigen and XLA: x·P(x²)/Q(x²) on [-4, 4], ±1
// outside (where fp32 erf rounds to ±1); absolute error below 5e-7, no exp or libm call, no
// branch. One definition for the CPU reference (ops/cpu_kernels.cpp, where it vectorizes) and the
// CUDA GELU (activation/gelu_math.cuh: nvcc fuses the multiply-adds and the division is the
// hardware reciprocal's, good to 2 ulp for Q in [-2.4, -0.014]). The result is clamped to [-1, 1]
// (the quotient exceeds 1 in magnitude by a few 1e-7 near |x| = 4); a NaN passes through.
// On the GPU both clamps are NaN-propagating min/max (one instruction each instead of two
// compares and two selects; the same value for every input): the FP8 GELU quantizations are
// bound by issue slots, and this took 9% off the forward one (docs/PERFORMANCE.md, session 29).
#pragma once

#ifdef __CUDACC__
#define BIOFM_ERF_HD __host__ __device__ __forceinline__
#else
#define BIOFM_ERF_HD inline
#endif

namespace biofm::ops {

// clamp(x, lo, hi) = x < lo ? lo : (x > hi ? hi : x), a NaN passing through.
BIOFM_ERF_HD float erf_clamp(float x, float lo, float hi) {
#ifdef __CUDA_ARCH__
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(hi));
  asm("max.NaN.f32 %0, %0, %1;" : "+f"(r) : "f"(lo));
  return r;
#else
  return x < lo ? lo : (x > hi ? hi : x);
#endif
}

BIOFM_ERF_HD float erf_rational(float x) {
  x = erf_clamp(x, -4.0f, 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
#ifdef __CUDA_ARCH__
  const float r = __fdividef(x * p, q);
#else
  const float r = x * p / q;
#endif
  return erf_clamp(r, -1.0f, 1.0f);
}

}  // namespace biofm::ops

#undef BIOFM_ERF_HD
