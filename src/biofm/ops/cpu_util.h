// Helpers shared by the CPU op implementations (src/biofm/ops/*/cpu.cpp): argument checks
// with messages that name the op and the tensor, row counting, the vectorised kernels of
// cpu_kernels.cpp (exp, GELU, SwiGLU, AdamW), and a guard that keeps OpenBLAS
// single-threaded inside our own OpenMP regions.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <omp.h>

#include "biofm/core/error.h"
#include "biofm/core/tensor.h"

namespace biofm::ops::cpu_detail {

// `t` must be defined, on the CPU, of dtype `dt`.
inline void require(const Tensor& t, DType dt, const char* op, const char* name) {
  if (!t.defined()) fail(op, ": ", name, " is undefined");
  if (t.device() != Device::CPU) fail(op, ": ", name, " must be on the CPU, got ", t.describe());
  if (t.dtype() != dt) fail(op, ": ", name, " must be ", dtype_name(dt), ", got ", t.describe());
}
inline void require_f32(const Tensor& t, const char* op, const char* name) {
  require(t, DType::F32, op, name);
}
inline void require_i32(const Tensor& t, const char* op, const char* name) {
  require(t, DType::I32, op, name);
}

// `t` must be F32/CPU with exactly `shape`.
inline void require_f32_shape(const Tensor& t, const Shape& shape, const char* op, const char* name) {
  require_f32(t, op, name);
  if (t.shape() != shape)
    fail(op, ": ", name, " must have shape ", shape_str(shape), ", got ", t.describe());
}

// A tensor read as a matrix [rows, cols]: at least 1-D, last dimension `cols` (when cols >= 0).
// Returns rows = numel / last dimension.
inline int64_t rows_of(const Tensor& t, int64_t cols, const char* op, const char* name) {
  if (t.dim() < 1) fail(op, ": ", name, " must have at least one dimension, got ", t.describe());
  int64_t last = t.size(-1);
  if (cols >= 0 && last != cols)
    fail(op, ": ", name, " must have last dimension ", cols, ", got ", t.describe());
  return last ? t.numel() / last : 0;
}

// Validates cu_seqlens[B+1] / seq_lens[B] against N rows (sequence s owns rows
// cu[s] .. cu[s]+len[s]; the rest of its slot up to cu[s+1] is padding).
inline void check_layout(const Tensor& cu_seqlens, const Tensor& seq_lens, int64_t N, const char* op) {
  require_i32(cu_seqlens, op, "cu_seqlens");
  require_i32(seq_lens, op, "seq_lens");
  if (cu_seqlens.dim() != 1 || seq_lens.dim() != 1 || cu_seqlens.numel() != seq_lens.numel() + 1)
    fail(op, ": cu_seqlens must be [B+1] and seq_lens [B], got ", cu_seqlens.describe(), " and ",
         seq_lens.describe());
  const int32_t* cu = cu_seqlens.i32();
  const int32_t* len = seq_lens.i32();
  const int64_t B = seq_lens.numel();
  if (cu[0] != 0) fail(op, ": cu_seqlens[0] must be 0, got ", cu[0]);
  for (int64_t s = 0; s < B; ++s) {
    if (cu[s + 1] < cu[s]) fail(op, ": cu_seqlens decreases at entry ", s + 1);
    if (len[s] < 0 || len[s] > cu[s + 1] - cu[s])
      fail(op, ": seq_lens[", s, "] = ", len[s], " does not fit its slot of ", cu[s + 1] - cu[s],
           " rows");
  }
  if (cu[B] > N) fail(op, ": cu_seqlens ends at ", cu[B], " but the batch has ", N, " rows");
}

// exp(x) for float, accurate to ~2 ulp on [-87, 88] (clamped outside: never inf/denormal),
// with no libm call. GCC vectorises it only where trapping math is off (the clamps), which
// is why the loops that use it live in cpu_kernels.cpp.
inline float exp_simd(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // n = round(x / ln 2) through the 1.5·2^23 trick; its low mantissa bits hold n.
  const float magic = 12582912.0f;
  float t = x * 1.44269504088896341f + magic;
  int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(magic);
  float n = t - magic;
  float r = x - n * 0.693359375f;    // ln2 high part (exact product)
  r = r - n * -2.12194440e-4f;       // ln2 low part
  // Cephes expf polynomial on |r| <= ln2/2.
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  float scale = std::bit_cast<float>((ni + 127) << 23);
  return y * scale;
}

inline int max_threads() { return omp_get_max_threads(); }
inline int thread_id() { return omp_get_thread_num(); }

// Per-thread double accumulators of `width` entries for column reductions (dw, db, ...):
// thread t adds into row(t) inside a parallel region of at most `threads` threads;
// add_to() then sums the partials in a fixed order and adds them to dst[width].
struct ThreadPartials {
  ThreadPartials(int threads, int64_t width)
      : threads(threads), width(width), buf(size_t(threads) * size_t(width), 0.0) {}
  double* row(int t) { return buf.data() + size_t(t) * size_t(width); }
  void add_to(float* dst) const {
    for (int64_t c = 0; c < width; ++c) {
      double s = 0;
      for (int t = 0; t < threads; ++t) s += buf[size_t(t) * size_t(width) + size_t(c)];
      dst[c] += float(s);
    }
  }
  int threads;
  int64_t width;
  std::vector<double> buf;
};

// Threads worth using for `work` elementwise operations (1 for small work).
inline int threads_for(int64_t work) { return work >= 32768 ? max_threads() : 1; }

// Vectorised row kernels (cpu_kernels.cpp: built for SSE2 and, where the CPU has it, AVX2).
// Same-index aliasing of outputs and inputs is allowed everywhere.
float max_of(const float* x, int64_t n);                  // n >= 1
float exp_shift_sum(float* x, int64_t n, float shift);    // x = exp(x - shift); returns Σ x
void exp_shift(float* x, int64_t n, float shift);         // x = exp(x - shift)
void gelu_rows(float* y, const float* x, int64_t n, bool tanh_form);
void gelu_grad_rows(float* dx, const float* dout, const float* x, int64_t n, bool tanh_form);
void swiglu_rows(float* y, const float* gate, const float* up, int64_t n);
// dgate / dup may be null (not wanted).
void swiglu_grad_rows(float* dgate, float* dup, const float* dout, const float* gate,
                      const float* up, int64_t n);

// One AdamW update over n elements with scalars prepared as torch does (see optim/cpu.cpp).
struct AdamWScalars {
  float decay;      // 1 - lr·wd
  float w1;         // 1 - beta1 (lerp weight)
  float beta2;
  float w2;         // 1 - beta2
  float step_size;  // -lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float eps;
  float grad_scale = 1.0f;  // g = grad · grad_scale first (gradient clipping)
};
// copy (may be null) receives the updated parameters rounded to bf16.
void adamw_rows(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                bf16* copy = nullptr);

// OpenBLAS (the pthread build) would start its own threads for every call made from inside
// our OpenMP regions; this guard makes it single-threaded for the guard's lifetime.
// Construct it on the calling thread, outside the parallel region.
struct BlasSingleThread {
  BlasSingleThread();
  ~BlasSingleThread();
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;
  int saved = 1;
};

// max |p[i]| over n values (0 for none): the amax of FP8 scaling.
inline float max_abs(const float* p, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(p[i]));
  return m;
}
// amax[0] = max |t| when amax (F32 [1]) is defined: an op's optional amax output.
inline void write_amax(const Tensor& amax, const Tensor& t, const char* op) {
  if (!amax.defined()) return;
  require_f32_shape(amax, {1}, op, "amax");
  amax.f32()[0] = max_abs(t.f32(), t.numel());
}

}  // namespace biofm::ops::cpu_detail
