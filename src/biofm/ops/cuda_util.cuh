// The one helper header of the CUDA op implementations (src/biofm/ops/*/cuda.cu and other
// nvcc sources): argument checks that name the op and the tensor, dtype dispatch (F32 / BF16
// to float / __nv_bfloat16), launch sizing, scratch memory, vector loads and stores that
// convert to and from fp32 registers, warp / block reductions, deterministic sums, and the
// amax accumulators of FP8 scaling. Device code only ever computes in fp32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/error.h"
#include "biofm/core/tensor.h"

namespace biofm::ops::cuda_detail {

// ---------------------------------------------------------------------------------------
// Host side: checks, dispatch, launch sizing, scratch memory.

// `t` must be defined and on the GPU.
inline void require_cuda(const Tensor& t, const char* op, const char* name) {
  if (!t.defined()) fail(op, ": ", name, " is undefined");
  if (t.device() != Device::CUDA) fail(op, ": ", name, " must be on the GPU, got ", t.describe());
}
// ... and of dtype `dt`.
inline void require_dtype(const Tensor& t, DType dt, const char* op, const char* name) {
  require_cuda(t, op, name);
  if (t.dtype() != dt) fail(op, ": ", name, " must be ", dtype_name(dt), ", got ", t.describe());
}
// ... and F32 or BF16.
inline void require_float(const Tensor& t, const char* op, const char* name) {
  require_cuda(t, op, name);
  if (t.dtype() != DType::F32 && t.dtype() != DType::BF16)
    fail(op, ": ", name, " must be F32 or BF16, got ", t.describe());
}
inline void require_shape(const Tensor& t, const Shape& s, const char* op, const char* name) {
  if (t.shape() != s)
    fail(op, ": ", name, " must have shape ", shape_str(s), ", got ", t.describe());
}
// Same shape and dtype as `ref`.
inline void require_like(const Tensor& t, const Tensor& ref, const char* op, const char* name,
                         const char* refname) {
  require_cuda(t, op, name);
  if (t.shape() != ref.shape() || t.dtype() != ref.dtype())
    fail(op, ": ", name, " ", t.describe(), " must match ", refname, " ", ref.describe());
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

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<float>{}) or f(TypeTag<__nv_bfloat16>{}) for an F32 / BF16 dtype.
template <class F>
decltype(auto) dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::F32:
      return f(TypeTag<float>{});
    case DType::BF16:
      return f(TypeTag<__nv_bfloat16>{});
    default:
      fail(op, ": unsupported dtype ", dtype_name(dt));
  }
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned(p, 16); }
inline bool aligned16(const Tensor& t) { return !t.defined() || aligned16(t.raw()); }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over `work` items of `per_block` each: at least 1, at most `cap`.
inline unsigned grid_for(int64_t work, int64_t per_block, int64_t cap) {
  return unsigned(std::clamp<int64_t>(ceil_div(work, per_block), 1, cap));
}
// A grid cap of `waves` blocks per SM: enough to fill the GPU several times over.
inline int64_t sm_waves(int waves = 8) { return int64_t(cuda_ctx::sm_count()) * waves; }

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

// ---------------------------------------------------------------------------------------
// Device side: conversions and vector access.

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
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
  vec_loop_kernel<V><<<grid_for(n / V + 1, kThreads, sm_waves(8)), kThreads, 0, cuda_ctx::stream()>>>(n, fn);
  BIOFM_CUDA_LAUNCH_CHECK();
}

// v[0..N) = p[0..N) in fp32. p must be aligned to min(16, N·sizeof(T)) bytes.
template <int N, class T>
__device__ __forceinline__ void load_vec(float (&v)[N], const T* p) {
  constexpr int kBytes = N * int(sizeof(T));
  if constexpr (N == 1) {
    v[0] = to_f32(*p);
  } else if constexpr (kBytes > 16) {
    static_assert(kBytes % 16 == 0, "pack of more than 16 bytes must be whole 16-byte words");
    constexpr int kPer = 16 / int(sizeof(T));
#pragma unroll
    for (int k = 0; k < N / kPer; ++k) {
      Pack<T, kPer> pk = *reinterpret_cast<const Pack<T, kPer>*>(p + k * kPer);
#pragma unroll
      for (int i = 0; i < kPer; ++i) v[k * kPer + i] = to_f32(pk.v[i]);
    }
  } else {
    Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = to_f32(pk.v[i]);
  }
}

// p[0..N) = v[0..N) rounded to T.
template <int N, class T>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[N]) {
  constexpr int kBytes = N * int(sizeof(T));
  if constexpr (N == 1) {
    *p = from_f32<T>(v[0]);
  } else if constexpr (kBytes > 16) {
    static_assert(kBytes % 16 == 0, "pack of more than 16 bytes must be whole 16-byte words");
    constexpr int kPer = 16 / int(sizeof(T));
#pragma unroll
    for (int k = 0; k < N / kPer; ++k) {
      Pack<T, kPer> pk;
#pragma unroll
      for (int i = 0; i < kPer; ++i) pk.v[i] = from_f32<T>(v[k * kPer + i]);
      *reinterpret_cast<Pack<T, kPer>*>(p + k * kPer) = pk;
    }
  } else {
    Pack<T, N> pk;
#pragma unroll
    for (int i = 0; i < N; ++i) pk.v[i] = from_f32<T>(v[i]);
    *reinterpret_cast<Pack<T, N>*>(p) = pk;
  }
}

// ---------------------------------------------------------------------------------------
// Reductions.

template <class T>
__device__ __forceinline__ T warp_sum(T x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float2 warp_sum2(float2 x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    x.x += __shfl_xor_sync(0xffffffffu, x.x, o);
    x.y += __shfl_xor_sync(0xffffffffu, x.y, o);
  }
  return x;
}

// Sum over the `nwarps` warps that cooperate on one row (threads [0, 32·nwarps) of a row
// group); every thread of the group gets the total. `scratch` holds at least nwarps floats
// private to the group and is reused on the next call only after the barrier inside.
// With nwarps == 1 it is a plain warp sum (no barrier); otherwise all threads of the block
// must call it (block-wide __syncthreads).
__device__ __forceinline__ float group_sum(float x, float* scratch, int lane, int warp,
                                           int nwarps) {
  x = warp_sum(x);
  if (nwarps == 1) return x;
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < nwarps; ++w) t += scratch[w];
  __syncthreads();
  return t;
}
__device__ __forceinline__ float2 group_sum2(float2 x, float2* scratch, int lane, int warp,
                                             int nwarps) {
  x = warp_sum2(x);
  if (nwarps == 1) return x;
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float2 t = make_float2(0.0f, 0.0f);
  for (int w = 0; w < nwarps; ++w) {
    t.x += scratch[w].x;
    t.y += scratch[w].y;
  }
  __syncthreads();
  return t;
}

// ---------------------------------------------------------------------------------------
// amax outputs for FP8 scaling: max |value| of what a kernel stored, accumulated as the bits of
// a float in an F32 [1] tensor (non-negative floats order like their bit patterns, so an
// unsigned atomicMax reduces them).

// Host: zeroes the accumulator on the stream and returns it for the kernel (null when amax is
// undefined).
inline unsigned* amax_accumulator(const Tensor& amax, const char* op) {
  if (!amax.defined()) return nullptr;
  require_dtype(amax, DType::F32, op, "amax");
  if (amax.numel() != 1) fail(op, ": amax must have one element, got ", amax.describe());
  unsigned* bits = static_cast<unsigned*>(amax.raw());
  BIOFM_CUDA_CHECK(cudaMemsetAsync(bits, 0, sizeof(unsigned), cuda_ctx::stream()));
  return bits;
}

// Host: a delayed-scaling history row (F32, fp8/delayed.h) whose slot 0 the kernel max-folds
// into, not zeroed: it holds the amax of the step's earlier micro batches (and of the forward
// pass that a recompute repeats), as fp8_amax_record would fold it.
inline unsigned* amax_record_slot(const Tensor& record, const char* op) {
  require_dtype(record, DType::F32, op, "record");
  if (record.numel() < 1) fail(op, ": record must be a history row, got ", record.describe());
  return static_cast<unsigned*>(record.raw());
}

// |v| as it reads back once stored in T.
template <class T>
__device__ __forceinline__ float stored_abs(float v) {
  return fabsf(to_f32(from_f32<T>(v)));
}

// Device: folds each thread's running max into the accumulator. Every lane of the warp calls it.
// Lane 0 sends its atomic only when its max is above the value it reads: every warp of a kernel
// targets the same word, and same-address atomics are served one at a time (session 23: one per
// warp of the FP8 GELU quantization, 164k per call at 16k x 5120, cost ~130 us; that kernel now
// also folds its warps per block first). The read goes to L2
// (__ldcg), where the atomics land: an L1 copy would keep the value of the SM's first read. The
// accumulator only grows during a kernel, so a stale read can cost an unneeded atomic but never
// skip a needed one.
__device__ __forceinline__ void amax_reduce_into(unsigned* bits, float m) {
  m = warp_max(m);
  const unsigned b = __float_as_uint(m);  // m >= 0 (NaN dropped): unsigned order is float order
  if ((threadIdx.x & 31) == 0 && b > __ldcg(bits)) atomicMax(bits, b);
}

// Sum over a block (blockDim.x a multiple of 32, at most 1024). The result is valid in
// thread 0. Deterministic for a given block size. `shared` needs 32 entries.
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

}  // namespace biofm::ops::cuda_detail
