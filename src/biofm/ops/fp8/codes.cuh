// Device helpers shared by the FP8 kernels with a per-tensor scale: fp8/cuda.cu's quantization
// and amax, fp8/delayed_cuda.cu's amax recording, the norms' FP8 output in norm/cuda.cu.
#pragma once
#include <cuda_fp8.h>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops::cuda::fp8_codes {

// Finite values round to nearest even and saturate; ±inf and NaN give the NaN code, so that an
// overflow upstream reaches the loss (and the trainer's non-finite check) instead of being clamped.
template <Fp8Type kType>
__device__ __forceinline__ uint8_t encode(float v) {
  if (!isfinite(v)) return 0x7f;
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, kType == Fp8Type::E4M3 ? __NV_E4M3 : __NV_E5M2);
}

// scale = fmax / amax, or 1 where amax is 0 or not finite (fp8_scale_for on the device); an
// overflowing quotient saturates to FLT_MAX.
__device__ __forceinline__ float scale_for(float amax, float fmax) {
  float scale = 1.0f;
  if (amax > 0.0f && isfinite(amax)) {
    scale = fmax / amax;
    if (!isfinite(scale)) scale = 3.402823466e38f;
  }
  return scale;
}

// fold(|v|) for every element v of x[n] that this thread takes in a grid-stride loop over the
// whole grid: 16-byte loads, four in flight, where vec (x 16-byte aligned), then the tail (or,
// without vec, everything) one element at a time.
template <class T, class Fold>
__device__ __forceinline__ void for_each_abs(const T* x, int64_t n, bool vec, Fold&& fold) {
  constexpr int V = 16 / sizeof(T), U = 4;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x, i0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nv = vec ? n / V : 0;
  int64_t i = i0;
  for (; i + (U - 1) * stride < nv; i += U * stride) {
    float v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) cuda_detail::load_vec<V>(v[u], x + (i + u * stride) * V);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < V; ++j) fold(fabsf(v[u][j]));
  }
  for (; i < nv; i += stride) {
    float v[V];
    cuda_detail::load_vec<V>(v, x + i * V);
#pragma unroll
    for (int j = 0; j < V; ++j) fold(fabsf(v[j]));
  }
  for (int64_t k = nv * V + i0; k < n; k += stride) fold(fabsf(cuda_detail::to_f32(x[k])));
}

// slot = max(slot, m) over the warp, with m a bit pattern of |x| (non-negative floats, and NaN
// above them, order as their bits; so NaN wins): a delayed-scaling history slot. Every lane calls
// it; lane 0 sends the atomic only when the warp's m is above the slot as L2 has it (as
// amax_reduce_into: the slot only grows during a kernel).
__device__ __forceinline__ void record_bits_into(unsigned* slot, unsigned m) {
  m = __reduce_max_sync(0xffffffffu, m);
  if ((threadIdx.x & 31) == 0 && m > __ldcg(slot)) atomicMax(slot, m);
}

// A kTile x kTile tile of codes in shared memory (rows kTile + 16 bytes apart: 16-byte aligned),
// written out transposed by a block of 256 threads: each stores 16 rows of one column,
// q_t[(col0 + j) * Rp + row0 + r ...], for columns < C and rows < Rp (Rp a multiple of 16, so the
// 16 rows are all in range). The 16-byte chunks of a row are XOR-swizzled by its group of 16 rows
// (tile_col): the 4 threads reading one column 16 rows apart then read 4 different banks; without
// it every byte read was a 4-way bank conflict, and the plain quantization of [16k, 5120] ran
// 122 us instead of 96 (session 29, H200). Writers put column c of row r at tile_col(r, c).
constexpr int kTile = 64;
__device__ __forceinline__ int tile_col(int r, int c) { return c ^ (((r >> 4) & 3) << 4); }
__device__ __forceinline__ void store_tile_transposed(const uint8_t (*tile)[kTile + 16], uint8_t* q_t, int64_t C,
                                                      int64_t Rp, int64_t row0, int64_t col0) {
  const int j = threadIdx.x >> 2, r = (threadIdx.x & 3) * 16;
  const int64_t gc = col0 + j, gr = row0 + r;
  if (gc < C && gr < Rp) {
    cuda_detail::Pack<uint8_t, 16> codes;
    const int pj = tile_col(r, j);  // the same for rows r .. r + 15
#pragma unroll
    for (int i = 0; i < 16; ++i) codes.v[i] = tile[r + i][pj];
    *reinterpret_cast<cuda_detail::Pack<uint8_t, 16>*>(q_t + gc * Rp + gr) = codes;
  }
}

}  // namespace biofm::ops::cuda::fp8_codes
