// Helpers shared by CUDA op implementations (*.cu): argument checks that name the op and the
// tensor, bf16/f32 load-store, launch sizing, block reductions, and scratch device memory
// from the caching allocator. Only for CUDA-build sources.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/tensor.h"

namespace biofm::cuda_core {

// ---- Host-side argument checks ----

// `t` must be defined and on the GPU.
inline void require_cuda(const Tensor& t, const char* op, const char* name) {
  if (!t.defined()) fail(op, ": ", name, " is undefined");
  if (t.device() != Device::CUDA) fail(op, ": ", name, " must be on the GPU, got ", t.describe());
}
// ... and of dtype `dt`.
inline void require_cuda(const Tensor& t, DType dt, const char* op, const char* name) {
  require_cuda(t, op, name);
  if (t.dtype() != dt) fail(op, ": ", name, " must be ", dtype_name(dt), ", got ", t.describe());
}
// ... and F32 or BF16.
inline void require_cuda_float(const Tensor& t, const char* op, const char* name) {
  require_cuda(t, op, name);
  if (t.dtype() != DType::F32 && t.dtype() != DType::BF16)
    fail(op, ": ", name, " must be F32 or BF16, got ", t.describe());
}
// A tensor read as [rows, cols] (cols = its last dimension, which must equal `cols` when
// cols >= 0); returns rows.
inline int64_t rows_of(const Tensor& t, int64_t cols, const char* op, const char* name) {
  if (t.dim() < 1) fail(op, ": ", name, " must have at least one dimension, got ", t.describe());
  const int64_t last = t.size(-1);
  if (cols >= 0 && last != cols)
    fail(op, ": ", name, " must have last dimension ", cols, ", got ", t.describe());
  return last ? t.numel() / last : 0;
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Blocks for a grid-stride loop over `work` items of `per_block` each, at most `cap`.
inline unsigned grid_for(int64_t work, int64_t per_block, int64_t cap = int64_t(1) << 20) {
  const int64_t b = (work + per_block - 1) / per_block;
  return unsigned(std::clamp<int64_t>(b, 1, cap));
}

// Device scratch memory from the caching allocator; freed (back to the cache) when it goes
// out of scope. Safe to free right after queueing the kernels that use it: one stream.
class Scratch {
 public:
  explicit Scratch(size_t bytes) : bytes_(bytes), ptr_(bytes ? device_alloc(bytes) : nullptr) {}
  ~Scratch() { device_free(ptr_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  size_t bytes_;
  void* ptr_;
};

// ---- Device-side helpers ----

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);  // round to nearest even, NaN kept
}

// V consecutive elements, loaded and stored as one access (16 B for 4 floats or 8 bf16s).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
template <int V, class T>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}
template <int V, class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& x) {
  *reinterpret_cast<Pack<T, V>*>(p) = x;
}

// Grid-stride loop over n elements in groups of V: calls fn.template run<V>(i) for every
// i = 0, V, 2V, ... below n - n % V, then fn.template run<1>(i) for the tail. Callers pick
// V > 1 only when every pointer fn touches is aligned to V elements.
template <int V, class Fn>
__global__ void vec_loop_kernel(int64_t n, Fn fn) {
  const int64_t groups = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = tid; g < groups; g += stride) fn.template run<V>(g * V);
  if constexpr (V > 1) {
    const int64_t t = groups * V + tid;
    if (t < n) fn.template run<1>(t);
  }
}

// Launches vec_loop_kernel on the compute stream (nothing for n == 0).
template <int V, class Fn>
void launch_vec_loop(int64_t n, const Fn& fn) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const int64_t cap = int64_t(cuda_ctx::sm_count()) * 8;  // about one full wave
  vec_loop_kernel<V><<<grid_for(n / V + 1, kThreads, cap), kThreads, 0, cuda_ctx::stream()>>>(n, fn);
  BIOFM_CUDA_LAUNCH_CHECK();
}

// Sum over a block (blockDim.x a multiple of 32, at most 1024). The result is valid in
// thread 0. Deterministic for a given block size. `shared` needs 32 entries.
template <class T>
__device__ __forceinline__ T warp_sum(T x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
template <class T>
__device__ __forceinline__ T block_sum(T x, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  x = warp_sum(x);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  x = threadIdx.x < warps ? shared[threadIdx.x] : T(0);
  if (warp == 0) x = warp_sum(x);
  return x;
}

// ---- Deterministic sums (the same result for the same input, on any GPU) ----
//
// Stage 1 (sum_partials_kernel): each block adds its grid-stride share of x (or x²) in
// double and writes one partial. Stage 2 is the caller's own one-block kernel, which sums
// the partials with block_sum in a fixed order (read them with partial_sum_of()). The grid
// depends only on n, never on the device.
constexpr int kSumThreads = 256;
constexpr int kSumMaxBlocks = 1024;  // stage 2 runs one block of this many threads

inline unsigned sum_blocks(int64_t n) { return grid_for(n, int64_t(kSumThreads) * 16, kSumMaxBlocks); }

template <class T, bool Square, int V>
__global__ void __launch_bounds__(kSumThreads) sum_partials_kernel(const T* x, int64_t n, double* partials) {
  __shared__ double red[32];
  double acc = 0;
  const int64_t groups = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = tid; g < groups; g += stride) {
    const Pack<T, V> p = load_pack<V>(x + g * V);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const double f = to_f32(p.v[j]);
      acc += Square ? f * f : f;
    }
  }
  for (int64_t i = groups * V + tid; i < n; i += stride) {
    const double f = to_f32(x[i]);
    acc += Square ? f * f : f;
  }
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Queues stage 1 over x[n] (F32 or BF16 per T) into `partials` (sum_blocks(n) doubles).
template <class T, bool Square>
void launch_sum_partials(const T* x, int64_t n, double* partials) {
  constexpr int V = 16 / sizeof(T);
  const unsigned blocks = sum_blocks(n);
  cudaStream_t s = cuda_ctx::stream();
  if (aligned(x, 16))
    sum_partials_kernel<T, Square, V><<<blocks, kSumThreads, 0, s>>>(x, n, partials);
  else
    sum_partials_kernel<T, Square, 1><<<blocks, kSumThreads, 0, s>>>(x, n, partials);
  BIOFM_CUDA_LAUNCH_CHECK();
}

// In stage 2 (one block of kSumMaxBlocks threads): the total of `count` partials, valid in
// thread 0; every thread of the block must call it.
__device__ __forceinline__ double partial_sum_of(const double* partials, int count) {
  __shared__ double red[32];
  const double x = int(threadIdx.x) < count ? partials[threadIdx.x] : 0.0;
  return block_sum(x, red);
}

}  // namespace biofm::cuda_core
