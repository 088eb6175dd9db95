// AdamW and gradient-norm tools, CUDA. The AdamW update is the same sequence of fp32
// operations as the CPU reference (cpu_kernels.cpp adamw_rows, itself torch.optim.AdamW's
// single-tensor path), written with explicit round-to-nearest intrinsics so that nvcc cannot
// contract or reorder them; the scalars are prepared on the host exactly as on the CPU.
// Sums of squares are deterministic (fixed two-stage reduction in double). Nothing here
// waits for the GPU: the clip coefficient and the norm stay in device memory.
#include <cuda_bf16.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/optim/op.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

// The double a user meant when writing this float (0.9f -> 0.9), as the CPU reference does:
// hyper-parameters reach torch as Python floats.
double decimal_double(float f) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *res.ptr = '\0';
  return std::strtod(buf, nullptr);
}

struct AdamScalars {
  float decay;      // 1 - lr*wd (applied where weight decay applies)
  float coeff;      // lerp coefficient: w1 when w1 < 0.5, else w1 - 1
  int small;        // torch's lerp form switch (w1 < 0.5)
  float beta2;
  float w2;         // 1 - beta2
  float step_size;  // -lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float eps;
};

AdamScalars adam_scalars(const AdamWHyper& h, const char* op) {
  if (h.step < 1) fail(op, ": step must be >= 1 (1-based), got ", h.step);
  const double lr = decimal_double(h.lr), b1 = decimal_double(h.beta1),
               b2 = decimal_double(h.beta2), wd = decimal_double(h.weight_decay);
  AdamScalars s;
  s.decay = float(1.0 - lr * wd);
  const float w1 = float(1.0 - b1);
  s.small = w1 < 0.5f;
  s.coeff = s.small ? w1 : w1 - 1.0f;
  s.beta2 = float(b2);
  s.w2 = float(1.0 - b2);
  s.step_size = float(-(lr / (1.0 - std::pow(b1, double(h.step)))));
  s.bc2_sqrt = float(std::sqrt(1.0 - std::pow(b2, double(h.step))));
  s.eps = float(decimal_double(h.eps));
  return s;
}

// One element: p = p·decay; m = lerp(m, g, 1-b1); v = b2·v + (1-b2)·g²;
// p += step_size · m / (sqrt(v) / sqrt(1-b2^t) + eps).
__device__ __forceinline__ void adamw_elem(float& p, float& m, float& v, float g, float decay,
                                           const AdamScalars& s) {
  const float pi = __fmul_rn(p, decay);
  const float mi = __fmaf_rn(s.coeff, __fsub_rn(g, m), s.small ? m : g);
  const float vi = __fmaf_rn(__fmul_rn(s.w2, g), g, __fmul_rn(v, s.beta2));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
  m = mi;
  v = vi;
  p = __fadd_rn(pi, __fdiv_rn(__fmul_rn(s.step_size, mi), denom));
}

struct AdamStepFn {
  float* p;
  const float* g;
  float* m;
  float* v;
  AdamScalars s;
  template <int V>
  __device__ void run(int64_t i) const {
    Pack<float, V> pp = load_pack<V>(p + i), mm = load_pack<V>(m + i), vv = load_pack<V>(v + i);
    const Pack<float, V> gg = load_pack<V>(g + i);
#pragma unroll
    for (int j = 0; j < V; ++j) adamw_elem(pp.v[j], mm.v[j], vv.v[j], gg.v[j], s.decay, s);
    store_pack<V>(p + i, pp);
    store_pack<V>(m + i, mm);
    store_pack<V>(v + i, vv);
  }
};

// Leaves everything untouched when clip_coef[0] is not finite (see grad_norm_clip_coef).
// P: the parameters' type. float, or __nv_bfloat16 for pure bf16 parameters: read and
// widened to fp32, updated by the same adamw_elem, written back rounded to nearest even
// (then copy is null).
template <class P>
struct AdamFlatFn {
  P* p;
  const float* g;
  float* m;
  float* v;
  __nv_bfloat16* copy;     // may be null
  const int64_t* ranges;   // [R, 2] sorted [start, end)
  int64_t R;
  const float* clip_coef;  // [1]
  AdamScalars s;

  // Index of the last range whose start is <= i, or -1.
  __device__ int64_t range_at(int64_t i) const {
    int64_t lo = 0, hi = R;  // first range with start > i lies in [lo, hi]
    while (lo < hi) {
      const int64_t mid = (lo + hi) >> 1;
      if (__ldg(ranges + 2 * mid) <= i)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo - 1;
  }

  template <int V>
  __device__ void run(int64_t i) const {
    const float clip = __ldg(clip_coef);
    if (!isfinite(clip)) return;  // non-finite gradients: the whole step is skipped
    int64_t r = range_at(i);
    Pack<P, V> pp = load_pack<V>(p + i);
    Pack<float, V> mm = load_pack<V>(m + i), vv = load_pack<V>(v + i);
    const Pack<float, V> gg = load_pack<V>(g + i);
    Pack<__nv_bfloat16, V> cc;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t e = i + j;
      while (r + 1 < R && __ldg(ranges + 2 * (r + 1)) <= e) ++r;
      const bool decays = r >= 0 && e < __ldg(ranges + 2 * r + 1);
      float pf = to_f32(pp.v[j]);
      adamw_elem(pf, mm.v[j], vv.v[j], __fmul_rn(gg.v[j], clip), decays ? s.decay : 1.0f, s);
      pp.v[j] = from_f32<P>(pf);
      cc.v[j] = __float2bfloat16_rn(pf);
    }
    store_pack<V>(p + i, pp);
    store_pack<V>(m + i, mm);
    store_pack<V>(v + i, vv);
    if constexpr (std::is_same_v<P, float>) {
      if (copy) store_pack<V>(copy + i, cc);
    }
  }
};

template <class P>
void launch_adamw_flat(const AdamFlatFn<P>& fn, int64_t n) {
  const bool vec = aligned(fn.p, 4 * sizeof(P)) && aligned(fn.g, 16) && aligned(fn.m, 16) &&
                   aligned(fn.v, 16) && (!fn.copy || aligned(fn.copy, 8));
  if (vec)
    launch_vec_loop<4>(n, fn);
  else
    launch_vec_loop<1>(n, fn);
}

struct ScaleFn {
  float* g;
  float factor;
  template <int V>
  __device__ void run(int64_t i) const {
    Pack<float, V> a = load_pack<V>(g + i);
#pragma unroll
    for (int j = 0; j < V; ++j) a.v[j] = __fmul_rn(a.v[j], factor);
    store_pack<V>(g + i, a);
  }
};

__global__ void __launch_bounds__(kSumMaxBlocks) add_partials_kernel(const double* partials, int count, float* acc) {
  const double total = partial_sum_of(partials, count);
  if (threadIdx.x == 0) acc[0] += float(total);
}

// norm = sqrt(Σ g²) (fp32, like torch's fp32 norm); clip = min(1, max_norm / (norm + 1e-6)),
// 1 without clipping, NaN when the norm is not finite.
__global__ void __launch_bounds__(kSumMaxBlocks) norm_clip_kernel(const double* partials, int count, float max_norm,
                                                 const float* divisor, float* norm, float* clip) {
  const double total = partial_sum_of(partials, count);
  if (threadIdx.x == 0) {
    const float d = divisor ? fmaxf(1.0f, divisor[0]) : 1.0f;
    const float nrm = float(sqrt(total) / double(d));  // (divided before narrowing: sums can exceed fp32)
    norm[0] = nrm;
    float c = 1.0f;
    if (max_norm > 0.0f) c = fminf(1.0f, __fdiv_rn(max_norm, __fadd_rn(nrm, 1e-6f)));
    if (!isfinite(nrm)) c = __int_as_float(0x7fc00000);  // NaN: adamw_flat skips the step
    clip[0] = __fdiv_rn(c, d);
  }
}

void require_flat_f32(const Tensor& t, int64_t n, const char* op, const char* name) {
  require_dtype(t, DType::F32, op, name);
  if (t.numel() != n) fail(op, ": ", name, " must hold ", n, " elements, got ", t.describe());
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h) {
  const char* op = "adamw_step";
  require_dtype(param, DType::F32, op, "param");
  const Tensor* others[] = {&grad, &m, &v};
  const char* names[] = {"grad", "m", "v"};
  for (int k = 0; k < 3; ++k) {
    require_dtype(*others[k], DType::F32, op, names[k]);
    if (others[k]->shape() != param.shape())
      fail(op, ": ", names[k], " must have shape ", shape_str(param.shape()), ", got ",
           others[k]->describe());
  }
  const AdamScalars s = adam_scalars(h, op);
  AdamStepFn fn{param.f32(), grad.f32(), m.f32(), v.f32(), s};
  const int64_t n = param.numel();
  if (aligned(fn.p, 16) && aligned(fn.g, 16) && aligned(fn.m, 16) && aligned(fn.v, 16))
    launch_vec_loop<4>(n, fn);
  else
    launch_vec_loop<1>(n, fn);
}

void sum_squares_accumulate(Tensor& acc, const Tensor& g) {
  const char* op = "sum_squares_accumulate";
  require_dtype(g, DType::F32, op, "g");
  require_dtype(acc, DType::F32, op, "acc");
  if (acc.numel() != 1) fail(op, ": acc must hold one element, got ", acc.describe());
  const int64_t n = g.numel();
  if (n == 0) return;
  const unsigned blocks = sum_blocks(n);
  Scratch partials(blocks * sizeof(double));
  launch_sum_partials<float, true>(g.f32(), n, partials.as<double>());
  add_partials_kernel<<<1, kSumMaxBlocks, 0, cuda_ctx::stream()>>>(partials.as<double>(), int(blocks),
                                                                  acc.f32());
  BIOFM_CUDA_LAUNCH_CHECK();
}

void scale_inplace(Tensor& g, float factor) {
  require_dtype(g, DType::F32, "scale_inplace", "g");
  ScaleFn fn{g.f32(), factor};
  if (aligned(fn.g, 16))
    launch_vec_loop<4>(g.numel(), fn);
  else
    launch_vec_loop<1>(g.numel(), fn);
}

void grad_norm_clip_coef(Tensor& norm, Tensor& clip_coef, const Tensor& grad, float max_norm,
                         const Tensor& grad_divisor) {
  const char* op = "grad_norm_clip_coef";
  require_dtype(grad, DType::F32, op, "grad");
  require_flat_f32(norm, 1, op, "norm");
  require_flat_f32(clip_coef, 1, op, "clip_coef");
  if (grad_divisor.defined()) require_flat_f32(grad_divisor, 1, op, "grad_divisor");
  const int64_t n = grad.numel();
  const unsigned blocks = n ? sum_blocks(n) : 0;
  Scratch partials(std::max(1u, blocks) * sizeof(double));
  if (n) launch_sum_partials<float, true>(grad.f32(), n, partials.as<double>());
  norm_clip_kernel<<<1, kSumMaxBlocks, 0, cuda_ctx::stream()>>>(partials.as<double>(), int(blocks), max_norm,
                                                               grad_divisor.defined() ? grad_divisor.f32() : nullptr,
                                                               norm.f32(), clip_coef.f32());
  BIOFM_CUDA_LAUNCH_CHECK();
}

void adamw_flat(Tensor& param, Tensor& compute_copy, const Tensor& grad, Tensor& m, Tensor& v,
                const Tensor& decay_ranges, const Tensor& clip_coef, const AdamWHyper& h) {
  const char* op = "adamw_flat";
  const bool bf16_params = param.defined() && param.dtype() == DType::BF16;
  require_dtype(param, bf16_params ? DType::BF16 : DType::F32, op, "param");  // F32 or BF16
  const int64_t n = param.numel();
  require_flat_f32(grad, n, op, "grad");
  require_flat_f32(m, n, op, "m");
  require_flat_f32(v, n, op, "v");
  require_flat_f32(clip_coef, 1, op, "clip_coef");
  // Undefined decay_ranges: no weight decay anywhere. Sortedness is the caller's promise
  // (checking it would need a host read of device memory).
  int64_t R = 0;
  if (decay_ranges.defined()) {
    require_dtype(decay_ranges, DType::I64, op, "decay_ranges");
    if (decay_ranges.dim() != 2 || decay_ranges.size(1) != 2)
      fail(op, ": decay_ranges must be [R, 2], got ", decay_ranges.describe());
    R = decay_ranges.size(0);
  }
  if (bf16_params && compute_copy.defined())
    fail(op, ": BF16 parameters take no compute copy (got ", compute_copy.describe(), ")");
  if (compute_copy.defined()) {
    require_dtype(compute_copy, DType::BF16, op, "compute_copy");
    if (compute_copy.numel() != n)
      fail(op, ": compute_copy must hold ", n, " elements, got ", compute_copy.describe());
  }
  const AdamScalars s = adam_scalars(h, op);
  const int64_t* ranges = R ? decay_ranges.i64() : nullptr;
  if (bf16_params) {
    launch_adamw_flat(AdamFlatFn<__nv_bfloat16>{static_cast<__nv_bfloat16*>(param.raw()), grad.f32(), m.f32(),
                                                v.f32(), nullptr, ranges, R, clip_coef.f32(), s},
                      n);
    return;
  }
  launch_adamw_flat(AdamFlatFn<float>{param.f32(), grad.f32(), m.f32(), v.f32(),
                                      compute_copy.defined() ? static_cast<__nv_bfloat16*>(compute_copy.raw()) : nullptr,
                                      ranges, R, clip_coef.f32(), s},
                    n);
}

}  // namespace biofm::ops::cuda
