// Helpers shared by the CUDA op implementations (src/biofm/ops/*/cuda.cu): argument checks
// that name the op and the tensor, dtype dispatch (F32 / BF16 to float / __nv_bfloat16),
// vector loads and stores that convert to and from fp32 registers, and warp / block
// reductions. Device code only ever computes in fp32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "biofm/core/cuda_context.h"
#include "biofm/core/error.h"
#include "biofm/core/tensor.h"

namespace biofm::ops::cuda_detail {

// ---------------------------------------------------------------------------------------
// Host side: checks and dispatch.

// `t` must be defined and on the GPU.
inline void require_cuda(const Tensor& t, const char* op, const char* name) {
  if (!t.defined()) fail(op, ": ", name, " is undefined");
  if (t.device() != Device::CUDA) fail(op, ": ", name, " must be on the GPU, got ", t.describe());
}
inline void require_dtype(const Tensor& t, DType dt, const char* op, const char* name) {
  require_cuda(t, op, name);
  if (t.dtype() != dt) fail(op, ": ", name, " must be ", dtype_name(dt), ", got ", t.describe());
}
// F32 or BF16.
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
// Rows of a tensor read as [rows, cols] (last dimension `cols`).
inline int64_t rows_of(const Tensor& t, int64_t cols, const char* op, const char* name) {
  if (t.dim() < 1) fail(op, ": ", name, " must have at least one dimension, got ", t.describe());
  if (t.size(-1) != cols)
    fail(op, ": ", name, " must have last dimension ", cols, ", got ", t.describe());
  return cols ? t.numel() / cols : 0;
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

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline bool aligned16(const Tensor& t) { return !t.defined() || aligned16(t.raw()); }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Grid size for a grid-stride loop over `work` items with `threads` per block: enough
// blocks to fill the GPU several times over, never more than the work needs.
inline unsigned grid_for(int64_t work, int threads, int waves = 8) {
  const int64_t need = ceil_div(work, threads);
  const int64_t cap = int64_t(cuda_ctx::sm_count()) * waves;
  const int64_t g = need < cap ? need : cap;
  return unsigned(g > 0 ? g : 1);
}

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

// Raw storage of N elements of T loaded or stored with the widest aligned accesses
// (16 bytes where the size allows; the address must be aligned to the pack size or 16).
template <class T, int N>
struct alignas(N * sizeof(T) >= 16 ? 16 : N * sizeof(T)) Pack {
  T v[N];
};

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

__device__ __forceinline__ float warp_sum(float x) {
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

// |v| as it reads back once stored in T.
template <class T>
__device__ __forceinline__ float stored_abs(float v) {
  return fabsf(to_f32(from_f32<T>(v)));
}

// Device: folds each thread's running max into the accumulator. Every lane of the warp calls it.
__device__ __forceinline__ void amax_reduce_into(unsigned* bits, float m) {
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) atomicMax(bits, __float_as_uint(m));
}

}  // namespace biofm::ops::cuda_detail
