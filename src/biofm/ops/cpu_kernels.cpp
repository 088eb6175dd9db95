// Vectorised elementwise kernels for the CPU backend (declared in cpu_util.h).
//
// The whole file is compiled without FP-trap and errno semantics (we never use either), so
// that GCC if-converts the clamps in exp_simd and vectorises these loops; each kernel is
// cloned for AVX2 (chosen at load time when the CPU has it) and the x86-64 baseline. No FMA
// is enabled, so both clones round elementwise results identically.
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include <cmath>

#include "biofm/ops/activation/erf_rational.h"
#include "biofm/ops/cpu_util.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BIOFM_CLONES __attribute__((target_clones("avx2", "default")))
#define BIOFM_CLONES_FMA __attribute__((target_clones("avx2,fma", "default")))
#else
#define BIOFM_CLONES
#define BIOFM_CLONES_FMA
#endif

namespace biofm::ops::cpu_detail {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1/sqrt(2π)
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kTanhCoef = 0.044715f;

// tanh(u) = 1 - 2/(exp(2u) + 1): exp_simd clamps, so ±large u gives ±1 exactly.
inline float tanh_simd(float u) { return 1.0f - 2.0f / (exp_simd(2.0f * u) + 1.0f); }

inline float sigmoid_simd(float x) { return 1.0f / (1.0f + exp_simd(-x)); }

inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erf_rational(x * kInvSqrt2)); }
inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanh_simd(kSqrt2OverPi * (x + kTanhCoef * x * x * x)));
}
inline float gelu_erf_grad(float x) {
  // Φ(x) + x·φ(x)
  return 0.5f * (1.0f + erf_rational(x * kInvSqrt2)) + x * kInvSqrt2Pi * exp_simd(-0.5f * x * x);
}
inline float gelu_tanh_grad(float x) {
  const float x2 = x * x;
  const float t = tanh_simd(kSqrt2OverPi * (x + kTanhCoef * x2 * x));
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kTanhCoef * x2);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace

BIOFM_CLONES float max_of(const float* x, int64_t n) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

BIOFM_CLONES float exp_shift_sum(float* x, int64_t n, float shift) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const float e = exp_simd(x[i] - shift);
    x[i] = e;
    s += e;
  }
  return s;
}

BIOFM_CLONES void exp_shift(float* x, int64_t n, float shift) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = exp_simd(x[i] - shift);
}

BIOFM_CLONES void gelu_rows(float* y, const float* x, int64_t n, bool tanh_form) {
  if (tanh_form) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(x[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_erf(x[i]);
  }
}

BIOFM_CLONES void gelu_grad_rows(float* dx, const float* dout, const float* x, int64_t n,
                                 bool tanh_form) {
  if (tanh_form) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] = dout[i] * gelu_tanh_grad(x[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] = dout[i] * gelu_erf_grad(x[i]);
  }
}

BIOFM_CLONES void swiglu_rows(float* y, const float* gate, const float* up, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * sigmoid_simd(gate[i]) * up[i];
}

BIOFM_CLONES void swiglu_grad_rows(float* dgate, float* dup, const float* dout, const float* gate,
                                   const float* up, int64_t n) {
  // silu(g)·u: d/dg = u·σ(g)·(1 + g·(1 - σ(g))), d/du = silu(g). Inputs are read before the
  // outputs are written, so either output may alias an input.
  if (dgate && dup) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i], u = up[i], d = dout[i];
      const float s = sigmoid_simd(g);
      dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
      dup[i] = d * g * s;
    }
  } else if (dgate) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i], s = sigmoid_simd(g);
      dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
    }
  } else if (dup) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dup[i] = dout[i] * gate[i] * sigmoid_simd(gate[i]);
  }
}

// torch.optim.AdamW, all three implementations (foreach, single-tensor, fused) on a CPU with
// FMA, element by element:
//   p *= decay;  m = lerp(m, g, w1) = fma(w1, g - m, m);
//   v = v·b2 + (w2·g)·g, which ATen's compiled kernel contracts to fma(w2·g, g, v·b2);
//   p += (step_size·m) / (sqrt(v)/bc2_sqrt + eps).
// std::fma keeps this bit-identical on every CPU (hardware FMA in the AVX2 clone, glibc's
// exact fma otherwise). No other expression here can be contracted, so both clones agree.
BIOFM_CLONES_FMA void adamw_rows(float* p, const float* g, float* m, float* v, int64_t n,
                                 const AdamWScalars& s, bf16* copy) {
  const float decay = s.decay, w1 = s.w1, b2 = s.beta2, w2 = s.w2, step = s.step_size,
              bc2s = s.bc2_sqrt, eps = s.eps, gs = s.grad_scale;
  const bool small = w1 < 0.5f;  // torch's lerp switches form at weight 0.5
  const float coeff = small ? w1 : w1 - 1.0f;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * gs;  // torch's clip_grad_norm_ multiplies grads by the clamped coef
    const float pi = p[i] * decay;
    const float mi = std::fma(coeff, gi - m[i], small ? m[i] : gi);
    const float vi = std::fma(w2 * gi, gi, v[i] * b2);
    const float denom = std::sqrt(vi) / bc2s + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + step * mi / denom;
  }
  if (copy)
    for (int64_t i = 0; i < n; ++i) copy[i] = f32_to_bf16(p[i]);
}

}  // namespace biofm::ops::cpu_detail
