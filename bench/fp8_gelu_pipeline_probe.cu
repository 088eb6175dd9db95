// Probe: does the FP8 GELU quantization (ops::fp8_quantize_gelu, DelayedScaling's MLP codes) run
// faster when each block walks many 64 x 64 tiles and loads the next tile into shared memory with
// cp.async while it computes the current one? The library kernel takes one tile per block and
// loads it into registers, so a block's loads and its GELU arithmetic (erf, exp) alternate, and
// only other resident blocks overlap them. Same arithmetic, same outputs: the probe checks that
// the codes, the transposed codes, the column sums and the amax are those of the library kernel,
// bit for bit, then times both at the ESM-2 650M shape ([16384, 5120] bf16).
//
// Standalone program (no CMake target), built like bench/fp8_gelu_bench.cpp with nvcc:
//   nvcc -std=c++20 -O3 -arch=sm_90a --expt-relaxed-constexpr -DBIOFM_WITH_CUDA=1 -Isrc -Ibench
//        bench/fp8_gelu_pipeline_probe.cu build/libbiofm_lib.a <biofm_lib's link libraries>
// Run on the GPU machine: ./fp8_gelu_pipeline_probe [iterations]   (default 50).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "biofm/ops/activation/gelu_math.cuh"
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/fp8/codes.cuh"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/cublaslt_plans_cuda.h"
#include "op_bench_util.h"

using namespace biofm;
using namespace biofm::ops;
using namespace biofm::ops::cuda;
using namespace biofm::ops::cuda_detail;
using nvbf16 = __nv_bfloat16;

namespace {

constexpr int kTile = fp8_codes::kTile, kThreads = 256;
constexpr int kStageRow = kTile + 8;  // bf16 per staged row: 16 bytes of padding (no bank conflicts)
enum class Src { X, Gelu, GeluGrad };

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }

// The tile's 16-byte chunks XOR-swizzled by row group (kSwizzle, what the library now does:
// fp8_codes::tile_col and store_tile_transposed), or as the library had them before session 29:
// row r's chunk c at c, read back by the 4 threads of a column 16 rows apart from one bank.
__device__ __forceinline__ int swz(int r, int c) { return fp8_codes::tile_col(r, c); }
__device__ __forceinline__ void store_tile_transposed_unswizzled(const uint8_t (*tile)[kTile + 16], uint8_t* q_t,
                                                                 int64_t C, int64_t Rp, int64_t row0, int64_t col0) {
  const int j = threadIdx.x >> 2, r = (threadIdx.x & 3) * 16;
  const int64_t gc = col0 + j, gr = row0 + r;
  if (gc < C && gr < Rp) {
    Pack<uint8_t, 16> codes;
#pragma unroll
    for (int i = 0; i < 16; ++i) codes.v[i] = tile[r + i][j];
    *reinterpret_cast<Pack<uint8_t, 16>*>(q_t + gc * Rp + gr) = codes;
  }
}

// x[R, C] with R, C multiples of 64 (the probe's shape). Grid: resident blocks; block b takes
// tiles b, b + grid, ... in row-major tile order.
template <Fp8Type kType, bool kColSums, Src kSrc, int kStages>
__global__ void __launch_bounds__(kThreads)
    pipelined_kernel(const nvbf16* x, const nvbf16* pre, int64_t R, int64_t C, const unsigned* amax_bits, float fmax,
                     uint8_t* q, uint8_t* q_t, float* scale_inv, float* col_partial, unsigned* seen_bits) {
  constexpr int kIn = kSrc == Src::GeluGrad ? 2 : 1;
  extern __shared__ __align__(16) unsigned char smem[];
  auto stage = reinterpret_cast<nvbf16(*)[kIn][kTile][kStageRow]>(smem);
  auto tile = reinterpret_cast<uint8_t(*)[kTile + 16]>(smem + sizeof(nvbf16) * kStages * kIn * kTile * kStageRow);
  auto vals = reinterpret_cast<nvbf16(*)[kTile + 8]>(reinterpret_cast<unsigned char*>(tile) + kTile * (kTile + 16));
  __shared__ float warp_seen[kThreads / 32];

  const float scale = fp8_codes::scale_for(__uint_as_float(*amax_bits), fmax);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = 1.0f / scale;
  const int64_t tiles_x = C / kTile, ntiles = tiles_x * (R / kTile);

  // Tile t's inputs into stage s: 64 rows x 128 bytes per input, 16 bytes per copy, 2 per thread.
  auto issue = [&](int64_t t, int s) {
    if (t < ntiles) {
      const int64_t row0 = (t / tiles_x) * kTile, col0 = (t % tiles_x) * kTile;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int k = threadIdx.x + i * kThreads, r = k >> 3, c = (k & 7) * 8;
        const int64_t g = (row0 + r) * C + col0 + c;
        cp_async16(&stage[s][0][r][c], pre + g);
        if constexpr (kSrc == Src::GeluGrad) cp_async16(&stage[s][1][r][c], x + g);
      }
    }
    cp_async_commit();  // an empty group past the end keeps wait_group's count right
  };

  float seen = 0.0f;
  const int r = threadIdx.x >> 2, c = (threadIdx.x & 3) * 16;
  int64_t t = blockIdx.x;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(t + s * int64_t(gridDim.x), s);
  for (int it = 0; t < ntiles; ++it, t += gridDim.x) {
    issue(t + (kStages - 1) * int64_t(gridDim.x), (it + kStages - 1) % kStages);
    if constexpr (kStages == 2)
      cp_async_wait_one();
    else
      asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1));
    __syncthreads();
    const int s = it % kStages;
    const int64_t row0 = (t / tiles_x) * kTile, col0 = (t % tiles_x) * kTile;
    float p[16], v[16];
    load_vec<16>(p, &stage[s][0][r][c]);
    if constexpr (kSrc == Src::GeluGrad) load_vec<16>(v, &stage[s][kIn - 1][r][c]);
    Pack<uint8_t, 16> codes;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if constexpr (kSrc == Src::X) {
        v[i] = p[i];
      } else {
        float y;
        if constexpr (kSrc == Src::Gelu)
          y = gelu_math::gelu_erf(p[i]);
        else
          y = v[i] * gelu_math::gelu_erf_grad(p[i]);
        v[i] = to_f32(from_f32<nvbf16>(y));
        seen = fmaxf(seen, fabsf(v[i]));
      }
      codes.v[i] = fp8_codes::encode<kType>(v[i] * scale);
    }
    *reinterpret_cast<Pack<uint8_t, 16>*>(q + (row0 + r) * C + col0 + c) = codes;
    *reinterpret_cast<Pack<uint8_t, 16>*>(&tile[r][c]) = codes;
    if constexpr (kColSums) store_vec<16>(&vals[r][c], v);
    __syncthreads();
    store_tile_transposed_unswizzled(tile, q_t, C, R, row0, col0);
    if constexpr (kColSums) {
      const int j = threadIdx.x >> 2, k = threadIdx.x & 3;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kTile / 4; ++i) sum += to_f32(vals[k + 4 * i][j]);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (k == 0) col_partial[(row0 / kTile) * C + col0 + j] = sum;
    }
    __syncthreads();  // the tile, vals and this stage are reused
  }
  if constexpr (kSrc == Src::X) return;
  seen = warp_max(seen);
  if ((threadIdx.x & 31) == 0) warp_seen[threadIdx.x >> 5] = seen;
  __syncthreads();
  if (threadIdx.x < 32) amax_reduce_into(seen_bits, threadIdx.x < kThreads / 32 ? warp_seen[threadIdx.x] : 0.0f);
}

template <Fp8Type kType, bool kColSums, Src kSrc, int kStages>
struct Pipelined {
  static size_t smem() {
    const int in = kSrc == Src::GeluGrad ? 2 : 1;
    return sizeof(nvbf16) * kStages * in * kTile * kStageRow + kTile * (kTile + 16) +
           (kColSums ? sizeof(nvbf16) * kTile * (kTile + 8) : 0);
  }
  int grid = 0;
  explicit Pipelined(int64_t R, int64_t C) {
    auto k = pipelined_kernel<kType, kColSums, kSrc, kStages>;
    BIOFM_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem())));
    int per_sm = 0;
    BIOFM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, smem()));
    grid = int(std::min<int64_t>(int64_t(per_sm) * cuda_ctx::sm_count(), (R / kTile) * (C / kTile)));
    std::printf("    (pipelined, %d stages: %d blocks per SM, %zu bytes of shared memory, grid %d)\n", kStages, per_sm,
                smem(), grid);
  }
  void run(Tensor& q, Tensor& qt, Tensor& s, const Tensor& pre, const Tensor& x, const Tensor& amax, Tensor& seen,
           Tensor& sums, Scratch* partial) const {
    const int64_t R = pre.size(0), C = pre.size(1);
    pipelined_kernel<kType, kColSums, kSrc, kStages><<<grid, kThreads, smem(), cuda_ctx::stream()>>>(
        x.defined() ? static_cast<const nvbf16*>(x.raw()) : nullptr, static_cast<const nvbf16*>(pre.raw()), R, C,
        static_cast<const unsigned*>(amax.raw()), fp8_max(kType), static_cast<uint8_t*>(q.raw()),
        static_cast<uint8_t*>(qt.raw()), s.f32(), partial ? partial->as<float>() : nullptr,
        static_cast<unsigned*>(seen.raw()));
    BIOFM_CUDA_LAUNCH_CHECK();
    if (partial) gemm_detail::column_partials_into(sums.f32(), C, partial->as<float>(), R / kTile);
  }
};


// ---------------------------------------------------------------------------------------
// Arithmetic variants of the library kernel (one 64 x 64 tile per block, as the library): the
// run-clock ncu of the first probe put the GELU quantizations at ~80% of the SMs' issue slots
// and ~41% of DRAM bandwidth, i.e. bound by instructions, not bytes. Flags:
//   kMinMax: the clamps of the rational erf (x to [-4, 4], the quotient to [-1, 1]) as
//            NaN-propagating min/max (one instruction each) instead of compare + select; the same
//            values for every input, NaN included.
//   kPairs:  codes two at a time (cvt ...x2.f32), with the non-finite rule (inf and NaN give
//            the NaN code) checked once per 16 values on their NaN-propagating max; same bytes.
//   kFma:    the polynomials' first Horner step and ½x(1 + erf) as single fused multiply-adds
//            (nvcc keeps them as multiply then add): may round differently in the last bit.
//   kFastExp: __expf in the GELU gradient (ex2.approx): may round differently.
__device__ __forceinline__ float min_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

template <bool kMinMax, bool kFma>
__device__ __forceinline__ float erf_variant(float x) {
  x = kMinMax ? max_nan(min_nan(x, 4.0f), -4.0f) : (x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x));
  const float x2 = x * x;
  float p, q;
  if constexpr (kFma) {
    p = fmaf(x2, -2.72614225801306e-10f, 2.77068142495902e-08f);
  } else {
    p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
  }
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  if constexpr (kFma) {
    q = fmaf(x2, -1.45660718464996e-05f, -2.13374055278905e-04f);
  } else {
    q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
  }
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  const float r = __fdividef(x * p, q);
  return kMinMax ? max_nan(min_nan(r, 1.0f), -1.0f) : (r < -1.0f ? -1.0f : (r > 1.0f ? 1.0f : r));
}

template <bool kMinMax, bool kFma>
__device__ __forceinline__ float gelu_variant(float x) {
  const float e = erf_variant<kMinMax, kFma>(x * gelu_math::kInvSqrt2);
  if constexpr (kFma) {
    const float h = 0.5f * x;
    return fmaf(h, e, h);
  } else {
    return 0.5f * x * (1.0f + e);
  }
}
template <bool kMinMax, bool kFma, bool kFastExp>
__device__ __forceinline__ float gelu_grad_variant(float x) {
  const float e = erf_variant<kMinMax, kFma>(x * gelu_math::kInvSqrt2);
  const float g = kFastExp ? __expf(-0.5f * x * x) : expf(-0.5f * x * x);
  if constexpr (kFma) return fmaf(0.5f, e, 0.5f) + x * gelu_math::kInvSqrt2Pi * g;
  return 0.5f * (1.0f + e) + x * gelu_math::kInvSqrt2Pi * g;
}

template <Fp8Type kType, bool kColSums, Src kSrc, bool kMinMax, bool kPairs, bool kFma, bool kFastExp,
          bool kSwizzle = false, bool kBounds = false>
__global__ void __launch_bounds__(kThreads)
    variant_kernel(const nvbf16* x, const nvbf16* pre, int64_t R, int64_t C, const unsigned* amax_bits, float fmax,
                   uint8_t* q, uint8_t* q_t, float* scale_inv, float* col_partial, unsigned* seen_bits) {
  __shared__ __align__(16) uint8_t tile[kTile][kTile + 16];
  __shared__ __align__(16) nvbf16 vals[kColSums ? kTile : 1][kColSums ? kTile + 8 : 8];
  __shared__ float warp_seen[kThreads / 32];
  const float scale = fp8_codes::scale_for(__uint_as_float(*amax_bits), fmax);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = 1.0f / scale;
  const int64_t row0 = int64_t(blockIdx.y) * kTile, col0 = int64_t(blockIdx.x) * kTile;
  const int r = threadIdx.x >> 2, c = (threadIdx.x & 3) * 16;
  const int64_t g = (row0 + r) * C + col0 + c;
  float v[16], p[16];
  // kBounds: the library's guard (a tile may cross R or C), here never false.
  const bool mine = !kBounds || (row0 + kTile <= R && col0 + kTile <= C) || (row0 + r < R && col0 + c < C);
  if (mine) {
    load_vec<16>(p, (kSrc == Src::X ? x : pre) + g);
    if constexpr (kSrc == Src::GeluGrad) load_vec<16>(v, x + g);
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) p[i] = v[i] = 0.0f;
  }
  float seen = 0.0f, vmax = 0.0f;  // vmax: NaN-propagating max |v| (kPairs)
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    if constexpr (kSrc == Src::X) {
      v[i] = p[i];
    } else {
      float y;
      if constexpr (kSrc == Src::Gelu)
        y = gelu_variant<kMinMax, kFma>(p[i]);
      else
        y = v[i] * gelu_grad_variant<kMinMax, kFma, kFastExp>(p[i]);
      v[i] = to_f32(from_f32<nvbf16>(y));
      if constexpr (!kPairs) seen = fmaxf(seen, fabsf(v[i]));
    }
    if constexpr (kPairs) vmax = max_nan(vmax, fabsf(v[i]));
  }
  if constexpr (kPairs && kSrc != Src::X) seen = fmaxf(0.0f, vmax);  // NaN dropped, as fmaxf does
  Pack<uint8_t, 16> codes;
  if (kPairs && isfinite(vmax * scale)) {
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
      const __nv_fp8x2_storage_t two = __nv_cvt_float2_to_fp8x2(
          make_float2(v[i] * scale, v[i + 1] * scale), __NV_SATFINITE, kType == Fp8Type::E4M3 ? __NV_E4M3 : __NV_E5M2);
      codes.v[i] = uint8_t(two & 0xff);
      codes.v[i + 1] = uint8_t(two >> 8);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) codes.v[i] = fp8_codes::encode<kType>(v[i] * scale);
  }
  if (mine) *reinterpret_cast<Pack<uint8_t, 16>*>(q + g) = codes;
  *reinterpret_cast<Pack<uint8_t, 16>*>(&tile[r][kSwizzle ? swz(r, c) : c]) = codes;
  if constexpr (kColSums) store_vec<16>(&vals[r][c], v);
  if constexpr (kSrc != Src::X) {
    seen = warp_max(seen);
    if ((threadIdx.x & 31) == 0) warp_seen[threadIdx.x >> 5] = seen;
  }
  __syncthreads();
  if constexpr (kSwizzle)
    fp8_codes::store_tile_transposed(tile, q_t, C, R, row0, col0);
  else
    store_tile_transposed_unswizzled(tile, q_t, C, R, row0, col0);
  if constexpr (kColSums) {
    const int j = threadIdx.x >> 2, k = threadIdx.x & 3;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) sum += to_f32(vals[k + 4 * i][j]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (k == 0) col_partial[int64_t(blockIdx.y) * C + col0 + j] = sum;
  }
  if constexpr (kSrc != Src::X)
    if (threadIdx.x < 32) amax_reduce_into(seen_bits, threadIdx.x < kThreads / 32 ? warp_seen[threadIdx.x] : 0.0f);
}

template <Fp8Type kType, bool kColSums, Src kSrc, bool kMinMax, bool kPairs, bool kFma, bool kFastExp = false,
          bool kSwizzle = false, bool kBounds = false>
void run_variant(Tensor& q, Tensor& qt, Tensor& s, const Tensor& pre, const Tensor& x, const Tensor& amax, Tensor& seen,
                 Tensor& sums, Scratch* partial) {
  const int64_t R = pre.size(0), C = pre.size(1);
  const dim3 grid(unsigned(C / kTile), unsigned(R / kTile));
  variant_kernel<kType, kColSums, kSrc, kMinMax, kPairs, kFma, kFastExp, kSwizzle, kBounds>
      <<<grid, kThreads, 0, cuda_ctx::stream()>>>(
      x.defined() ? static_cast<const nvbf16*>(x.raw()) : nullptr, static_cast<const nvbf16*>(pre.raw()), R, C,
      static_cast<const unsigned*>(amax.raw()), fp8_max(kType), static_cast<uint8_t*>(q.raw()),
      static_cast<uint8_t*>(qt.raw()), s.f32(), partial ? partial->as<float>() : nullptr,
      static_cast<unsigned*>(seen.raw()));
  BIOFM_CUDA_LAUNCH_CHECK();
  if (partial) gemm_detail::column_partials_into(sums.f32(), C, partial->as<float>(), R / kTile);
}

// A copy of the library's quantize_kernel (src/biofm/ops/fp8/cuda.cu at 50607b4, inside tiles
// only) with switches that take out one of its differences from the variant kernel above at a
// time (run F: the library ran 7 / 13 / 9 us slower than "min/max + swizzled tile" for the GELU,
// the GELU gradient and the plain quantization with column sums). kMods bits:
//   1: no runtime checks of q, q_t and record_bits (stores unconditional);
//   2: no tile offsets (tx0, ty0) in the tile's coordinates;
//   4: the column sums' partial row indexed by blockIdx.y, without the gc < C check;
//   8: the erf of the variant (min_nan / max_nan helpers) instead of gelu_math's.
template <Fp8Type kType, bool kColSums, Src kSrc, int kMods>
__global__ void __launch_bounds__(kThreads)
    libcopy_kernel(const nvbf16* x, int64_t R, int64_t C, int64_t Rp, int tx0, int ty0, const unsigned* amax_bits,
                   float fmax, uint8_t* q, uint8_t* q_t, float* scale_inv, float* col_partial, const nvbf16* pre,
                   unsigned* seen_bits, unsigned* record_bits) {
  using T = nvbf16;
  constexpr bool kNoChecks = kMods & 1, kNoOffsets = kMods & 2, kPlainSums = kMods & 4, kVariantErf = kMods & 8;
  __shared__ __align__(16) uint8_t tile[kTile][kTile + 16];
  __shared__ __align__(16) T vals[kColSums ? kTile : 1][kColSums ? kTile + 16 / sizeof(T) : 8];
  const float scale = fp8_codes::scale_for(__uint_as_float(*amax_bits), fmax);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = 1.0f / scale;
  const int64_t ty = kNoOffsets ? int64_t(blockIdx.y) : int64_t(blockIdx.y) + ty0, row0 = ty * kTile;
  const int64_t col0 = (kNoOffsets ? int64_t(blockIdx.x) : int64_t(blockIdx.x) + tx0) * kTile;
  float seen = 0.0f;
  unsigned recorded = 0;
  const int r = threadIdx.x >> 2, c = (threadIdx.x & 3) * 16;
  const int64_t gr = row0 + r, gc = col0 + c;
  const bool mine = true;
  float v[16];
  if constexpr (kSrc == Src::X) {
    if (mine) {
      load_vec<16>(v, x + gr * C + gc);
      if (!kNoChecks && record_bits)
#pragma unroll
        for (int i = 0; i < 16; ++i) recorded = max(recorded, __float_as_uint(fabsf(v[i])));
    }
  } else {
    float p[16];
    if (mine) {
      load_vec<16>(p, pre + gr * C + gc);
      if constexpr (kSrc == Src::GeluGrad) load_vec<16>(v, x + gr * C + gc);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float s;
      if constexpr (kSrc == Src::Gelu)
        s = kVariantErf ? gelu_variant<true, false>(p[i]) : gelu_math::gelu_erf(p[i]);
      else
        s = v[i] * (kVariantErf ? gelu_grad_variant<true, false, false>(p[i]) : gelu_math::gelu_erf_grad(p[i]));
      v[i] = to_f32(from_f32<T>(s));
      seen = fmaxf(seen, fabsf(v[i]));
    }
  }
  Pack<uint8_t, 16> codes;
#pragma unroll
  for (int i = 0; i < 16; ++i) codes.v[i] = fp8_codes::encode<kType>(v[i] * scale);
  if (kNoChecks || (q && mine)) *reinterpret_cast<Pack<uint8_t, 16>*>(q + gr * C + gc) = codes;
  *reinterpret_cast<Pack<uint8_t, 16>*>(&tile[r][fp8_codes::tile_col(r, c)]) = codes;
  if constexpr (kColSums) store_vec<16>(&vals[r][c], v);
  __shared__ float warp_seen[kSrc != Src::X ? kThreads / 32 : 1];
  if constexpr (kSrc != Src::X) {
    seen = warp_max(seen);
    if ((threadIdx.x & 31) == 0) warp_seen[threadIdx.x >> 5] = seen;
  }
  if (!kNoChecks && record_bits) fp8_codes::record_bits_into(record_bits, recorded);
  if (!kNoChecks && kSrc == Src::X && !q_t && !kColSums) return;
  __syncthreads();
  if (kNoChecks || q_t) fp8_codes::store_tile_transposed(tile, q_t, C, Rp, row0, col0);
  if constexpr (kColSums) {
    const int j = threadIdx.x >> 2, k = threadIdx.x & 3;
    const int64_t gcj = col0 + j;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) sum += to_f32(vals[k + 4 * i][j]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (kPlainSums) {
      if (k == 0) col_partial[int64_t(blockIdx.y) * C + gcj] = sum;
    } else {
      if (k == 0 && gcj < C) col_partial[ty * C + gcj] = sum;
    }
  }
  if constexpr (kSrc != Src::X)
    if (threadIdx.x < 32) amax_reduce_into(seen_bits, threadIdx.x < kThreads / 32 ? warp_seen[threadIdx.x] : 0.0f);
}

template <Fp8Type kType, bool kColSums, Src kSrc, int kMods>
void run_libcopy(Tensor& q, Tensor& qt, Tensor& s, const Tensor& pre, const Tensor& x, const Tensor& amax, Tensor& seen,
                 Tensor& sums, Scratch* partial) {
  const int64_t R = pre.size(0), C = pre.size(1);
  libcopy_kernel<kType, kColSums, kSrc, kMods><<<dim3(unsigned(C / kTile), unsigned(R / kTile)), kThreads, 0,
                                                  cuda_ctx::stream()>>>(
      static_cast<const nvbf16*>(x.raw()), R, C, R, 0, 0, static_cast<const unsigned*>(amax.raw()), fp8_max(kType),
      static_cast<uint8_t*>(q.raw()), static_cast<uint8_t*>(qt.raw()), s.f32(),
      partial ? partial->as<float>() : nullptr, static_cast<const nvbf16*>(pre.raw()),
      kSrc == Src::X ? nullptr : static_cast<unsigned*>(seen.raw()), nullptr);
  BIOFM_CUDA_LAUNCH_CHECK();
  if (partial) gemm_detail::column_partials_into(sums.f32(), C, partial->as<float>(), R / kTile);
}

std::vector<uint8_t> host_bytes(const Tensor& t) {
  std::vector<uint8_t> h(size_t(t.numel()) * dtype_size(t.dtype()));
  BIOFM_CUDA_CHECK(cudaMemcpy(h.data(), t.raw(), h.size(), cudaMemcpyDeviceToHost));
  return h;
}

bool same(const char* what, const Tensor& a, const Tensor& b) {
  const auto x = host_bytes(a), y = host_bytes(b);
  size_t diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff += x[i] != y[i];
  std::printf("    %-12s %s (%zu of %zu bytes differ)\n", what, diff ? "DIFFER" : "identical", diff, x.size());
  return diff == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int64_t R = 16384, C = 5120;
  const double n = double(R) * double(C);
  const Tensor pre = bench::random_gpu({R, C}, 1, 1.5f), dact = bench::random_gpu({R, C}, 2, 1e-3f);
  auto u8 = [](int64_t a, int64_t b) { return Tensor::empty({a, b}, DType::U8, Device::CUDA); };
  Tensor q = u8(R, C), qt = u8(C, R), q2 = u8(R, C), qt2 = u8(C, R);
  Tensor s = Tensor::zeros({1}, DType::F32, Device::CUDA), s2 = Tensor::zeros({1}, DType::F32, Device::CUDA);
  auto zeros1 = [] { return Tensor::zeros({1}, DType::F32, Device::CUDA); };
  Tensor seen = zeros1(), seen2 = zeros1();
  Tensor sums = Tensor::zeros({C}, DType::F32, Device::CUDA), sums2 = Tensor::zeros({C}, DType::F32, Device::CUDA);
  const Tensor amax_fwd = Tensor::from_f32({1}, {6.0f}).to(Device::CUDA);
  const Tensor amax_bwd = Tensor::from_f32({1}, {4e-3f}).to(Device::CUDA);
  const Fp8Type e4 = Fp8Type::E4M3, e5 = Fp8Type::E5M2;
  Tensor none;
  Scratch partial(size_t(R / kTile) * size_t(C) * sizeof(float));
  auto row = [&](const char* what, double ms, double bytes) {
    std::printf("  %-52s %8.1f us  %6.0f GB/s\n", what, 1000.0 * ms, n * bytes / (ms * 1e-3) / 1e9);
  };
  bool ok = true;

  std::printf("[%lld, %lld] bf16, us per call (GB/s of the bytes that must move)\n", (long long)R, (long long)C);
  std::printf("forward (E4M3, q and q_t)\n");
  {
    Pipelined<Fp8Type::E4M3, false, Src::Gelu, 2> p2(R, C);
    Pipelined<Fp8Type::E4M3, false, Src::Gelu, 3> p3(R, C);
    ops::fp8_quantize_gelu(q, qt, s, pre, none, e4, amax_fwd, seen);
    p2.run(q2, qt2, s2, pre, none, amax_fwd, seen2, sums2, nullptr);
    ok &= same("q", q, q2) & same("q_t", qt, qt2) & same("scale_inv", s, s2) & same("amax", seen, seen2);
    q2 = u8(R, C), qt2 = u8(C, R);
    p3.run(q2, qt2, s2, pre, none, amax_fwd, seen2, sums2, nullptr);
    ok &= same("q (3)", q, q2) & same("q_t (3)", qt, qt2);
    for (int rep = 0; rep < 2; ++rep) {
      row("library fp8_quantize_gelu", bench::time_ms(iters, [&] {
            ops::fp8_quantize_gelu(q, qt, s, pre, none, e4, amax_fwd, seen);
          }), 4);
      row("pipelined, 2 stages", bench::time_ms(iters, [&] {
            p2.run(q2, qt2, s2, pre, none, amax_fwd, seen2, sums2, nullptr);
          }), 4);
      row("pipelined, 3 stages", bench::time_ms(iters, [&] {
            p3.run(q2, qt2, s2, pre, none, amax_fwd, seen2, sums2, nullptr);
          }), 4);
      row("library fp8_quantize (no GELU)", bench::time_ms(iters, [&] {
            ops::fp8_quantize(q, qt, s, pre, e4, amax_fwd);
          }), 4);
    }
  }
  std::printf("backward (E5M2, q and q_t, column sums)\n");
  {
    Pipelined<Fp8Type::E5M2, true, Src::GeluGrad, 2> p2(R, C);
    Pipelined<Fp8Type::E5M2, true, Src::GeluGrad, 3> p3(R, C);
    seen = zeros1(), seen2 = zeros1();
    sums = Tensor::zeros({C}, DType::F32, Device::CUDA), sums2 = Tensor::zeros({C}, DType::F32, Device::CUDA);
    ops::fp8_quantize_gelu(q, qt, s, pre, dact, e5, amax_bwd, seen, sums);
    p2.run(q2, qt2, s2, pre, dact, amax_bwd, seen2, sums2, &partial);
    ok &= same("q", q, q2) & same("q_t", qt, qt2) & same("scale_inv", s, s2) & same("amax", seen, seen2) &
          same("column sums", sums, sums2);
    q2 = u8(R, C), qt2 = u8(C, R);
    sums2 = Tensor::zeros({C}, DType::F32, Device::CUDA);
    p3.run(q2, qt2, s2, pre, dact, amax_bwd, seen2, sums2, &partial);
    ok &= same("q (3)", q, q2) & same("q_t (3)", qt, qt2) & same("sums (3)", sums, sums2);
    for (int rep = 0; rep < 2; ++rep) {
      row("library fp8_quantize_gelu", bench::time_ms(iters, [&] {
            ops::fp8_quantize_gelu(q, qt, s, pre, dact, e5, amax_bwd, seen, sums);
          }), 6);
      row("pipelined, 2 stages", bench::time_ms(iters, [&] {
            p2.run(q2, qt2, s2, pre, dact, amax_bwd, seen2, sums2, &partial);
          }), 6);
      row("pipelined, 3 stages", bench::time_ms(iters, [&] {
            p3.run(q2, qt2, s2, pre, dact, amax_bwd, seen2, sums2, &partial);
          }), 6);
      row("library fp8_quantize with column sums (no GELU)", bench::time_ms(iters, [&] {
            ops::fp8_quantize(q, qt, s, dact, e5, amax_bwd, sums);
          }), 4);
    }
  }
  std::printf("plain quantization, backward-style (E5M2, q and q_t, column sums) and forward-style (E4M3, q and q_t)\n");
  {
    Pipelined<Fp8Type::E5M2, true, Src::X, 2> p2(R, C);
    Pipelined<Fp8Type::E4M3, false, Src::X, 2> f2(R, C);
    Tensor copy = Tensor::empty({R, C}, DType::BF16, Device::CUDA);
    sums = Tensor::zeros({C}, DType::F32, Device::CUDA), sums2 = Tensor::zeros({C}, DType::F32, Device::CUDA);
    ops::fp8_quantize(q, qt, s, dact, e5, amax_bwd, sums);
    p2.run(q2, qt2, s2, dact, none, amax_bwd, seen2, sums2, &partial);
    ok &= same("q", q, q2) & same("q_t", qt, qt2) & same("column sums", sums, sums2);
    ops::fp8_quantize(q, qt, s, pre, e4, amax_fwd);
    f2.run(q2, qt2, s2, pre, none, amax_fwd, seen2, sums2, nullptr);
    ok &= same("q (E4M3)", q, q2) & same("q_t (E4M3)", qt, qt2);
    for (int rep = 0; rep < 2; ++rep) {
      row("library fp8_quantize, E5M2 with column sums", bench::time_ms(iters, [&] {
            ops::fp8_quantize(q, qt, s, dact, e5, amax_bwd, sums);
          }), 4);
      row("pipelined, 2 stages", bench::time_ms(iters, [&] {
            p2.run(q2, qt2, s2, dact, none, amax_bwd, seen2, sums2, &partial);
          }), 4);
      row("library fp8_quantize, E4M3", bench::time_ms(iters, [&] {
            ops::fp8_quantize(q, qt, s, pre, e4, amax_fwd);
          }), 4);
      row("pipelined, 2 stages", bench::time_ms(iters, [&] {
            f2.run(q2, qt2, s2, pre, none, amax_fwd, seen2, sums2, nullptr);
          }), 4);
      row("device-to-device copy of the bf16 tensor (2 + 2 bytes)", bench::time_ms(iters, [&] {
            cudaMemcpyAsync(copy.raw(), pre.raw(), pre.nbytes(), cudaMemcpyDeviceToDevice, cuda_ctx::stream());
          }), 4);
    }
  }

  // Arithmetic variants: each against the library kernel (bytes that differ), then timed
  // alternating with the library kernel.
  std::printf("arithmetic variants (one tile per block, as the library)\n");
  {
    struct V {
      const char* name;
      bool exact;  // expected identical to the library
      std::function<void(Tensor&, Tensor&, Tensor&, Tensor&, Tensor&)> run;  // q, qt, s, seen, sums
    };
    auto fwd = [&](auto fn) {
      return [&, fn](Tensor& q_, Tensor& qt_, Tensor& s_, Tensor& seen_, Tensor& sums_) {
        fn(q_, qt_, s_, pre, pre, amax_fwd, seen_, sums_, nullptr);  // x: read only by Src::X
      };
    };
    auto bwd = [&](auto fn) {
      return [&, fn](Tensor& q_, Tensor& qt_, Tensor& s_, Tensor& seen_, Tensor& sums_) {
        fn(q_, qt_, s_, pre, dact, amax_bwd, seen_, sums_, &partial);
      };
    };
    auto plain = [&](auto fn) {
      return [&, fn](Tensor& q_, Tensor& qt_, Tensor& s_, Tensor& seen_, Tensor& sums_) {
        fn(q_, qt_, s_, dact, dact, amax_bwd, seen_, sums_, &partial);
      };
    };
    constexpr auto E4 = Fp8Type::E4M3, E5 = Fp8Type::E5M2;
    const std::vector<V> fwd_variants = {
        {"library", true, [&](Tensor& q_, Tensor& qt_, Tensor& s_, Tensor& seen_, Tensor&) {
           ops::fp8_quantize_gelu(q_, qt_, s_, pre, none, e4, amax_fwd, seen_);
         }},
        {"copy (no flag)", true, fwd(run_variant<E4, false, Src::Gelu, false, false, false>)},
        {"min/max clamps", true, fwd(run_variant<E4, false, Src::Gelu, true, false, false>)},
        {"pairs", true, fwd(run_variant<E4, false, Src::Gelu, false, true, false>)},
        {"min/max + pairs", true, fwd(run_variant<E4, false, Src::Gelu, true, true, false>)},
        {"min/max + pairs + fma", false, fwd(run_variant<E4, false, Src::Gelu, true, true, true>)},
        {"min/max, bounds as the library", true, fwd(run_variant<E4, false, Src::Gelu, true, false, false, false, false, true>)},
        {"min/max + swizzled tile", true, fwd(run_variant<E4, false, Src::Gelu, true, false, false, false, true>)},
        {"min/max + swizzled tile + bounds", true, fwd(run_variant<E4, false, Src::Gelu, true, false, false, false, true, true>)},
        {"library copy", true, fwd(run_libcopy<E4, false, Src::Gelu, 0>)},
        {"library copy, no checks", true, fwd(run_libcopy<E4, false, Src::Gelu, 1>)},
        {"library copy, no offsets", true, fwd(run_libcopy<E4, false, Src::Gelu, 2>)},
        {"library copy, variant erf", true, fwd(run_libcopy<E4, false, Src::Gelu, 8>)},
        {"library copy, all four", true, fwd(run_libcopy<E4, false, Src::Gelu, 15>)},
    };
    const std::vector<V> bwd_variants = {
        {"library", true, [&](Tensor& q_, Tensor& qt_, Tensor& s_, Tensor& seen_, Tensor& sums_) {
           ops::fp8_quantize_gelu(q_, qt_, s_, pre, dact, e5, amax_bwd, seen_, sums_);
         }},
        {"copy (no flag)", true, bwd(run_variant<E5, true, Src::GeluGrad, false, false, false>)},
        {"min/max clamps", true, bwd(run_variant<E5, true, Src::GeluGrad, true, false, false>)},
        {"pairs", true, bwd(run_variant<E5, true, Src::GeluGrad, false, true, false>)},
        {"min/max + pairs", true, bwd(run_variant<E5, true, Src::GeluGrad, true, true, false>)},
        {"min/max + pairs + fma", false, bwd(run_variant<E5, true, Src::GeluGrad, true, true, true>)},
        {"min/max + pairs + fma + __expf", false, bwd(run_variant<E5, true, Src::GeluGrad, true, true, true, true>)},
        {"min/max, bounds as the library", true, bwd(run_variant<E5, true, Src::GeluGrad, true, false, false, false, false, true>)},
        {"min/max + swizzled tile", true, bwd(run_variant<E5, true, Src::GeluGrad, true, false, false, false, true>)},
        {"min/max + swizzled tile + bounds", true, bwd(run_variant<E5, true, Src::GeluGrad, true, false, false, false, true, true>)},
        {"library copy", true, bwd(run_libcopy<E5, true, Src::GeluGrad, 0>)},
        {"library copy, no checks", true, bwd(run_libcopy<E5, true, Src::GeluGrad, 1>)},
        {"library copy, no offsets", true, bwd(run_libcopy<E5, true, Src::GeluGrad, 2>)},
        {"library copy, plain sums", true, bwd(run_libcopy<E5, true, Src::GeluGrad, 4>)},
        {"library copy, variant erf", true, bwd(run_libcopy<E5, true, Src::GeluGrad, 8>)},
        {"library copy, all four", true, bwd(run_libcopy<E5, true, Src::GeluGrad, 15>)},
    };
    const std::vector<V> plain_variants = {
        {"library", true, [&](Tensor& q_, Tensor& qt_, Tensor& s_, Tensor&, Tensor& sums_) {
           ops::fp8_quantize(q_, qt_, s_, dact, e5, amax_bwd, sums_);
         }},
        {"copy (no flag)", true, plain(run_variant<E5, true, Src::X, false, false, false>)},
        {"pairs", true, plain(run_variant<E5, true, Src::X, false, true, false>)},
        {"swizzled tile", true, plain(run_variant<E5, true, Src::X, false, false, false, false, true>)},
        {"swizzled tile + bounds", true, plain(run_variant<E5, true, Src::X, false, false, false, false, true, true>)},
        {"library copy", true, plain(run_libcopy<E5, true, Src::X, 0>)},
        {"library copy, no checks", true, plain(run_libcopy<E5, true, Src::X, 1>)},
        {"library copy, no offsets", true, plain(run_libcopy<E5, true, Src::X, 2>)},
        {"library copy, plain sums", true, plain(run_libcopy<E5, true, Src::X, 4>)},
        {"library copy, all", true, plain(run_libcopy<E5, true, Src::X, 7>)},
    };
    const std::vector<V> plain_e4_variants = {
        {"library", true, [&](Tensor& q_, Tensor& qt_, Tensor& s_, Tensor&, Tensor&) {
           ops::fp8_quantize(q_, qt_, s_, pre, e4, amax_fwd);
         }},
        {"copy (no flag)", true, fwd(run_variant<E4, false, Src::X, false, false, false>)},
        {"swizzled tile", true, fwd(run_variant<E4, false, Src::X, false, false, false, false, true>)},
        {"swizzled tile + bounds", true, fwd(run_variant<E4, false, Src::X, false, false, false, false, true, true>)},
    };
    auto study = [&](const char* title, const std::vector<V>& vs, double bytes) {
      std::printf("%s\n", title);
      Tensor ref_q = u8(R, C), ref_qt = u8(C, R), ref_s = zeros1(), ref_seen = zeros1();
      Tensor ref_sums = Tensor::zeros({C}, DType::F32, Device::CUDA);
      vs[0].run(ref_q, ref_qt, ref_s, ref_seen, ref_sums);
      for (size_t i = 1; i < vs.size(); ++i) {
        Tensor q_ = u8(R, C), qt_ = u8(C, R), s_ = zeros1(), seen_ = zeros1();
        Tensor sums_ = Tensor::zeros({C}, DType::F32, Device::CUDA);
        vs[i].run(q_, qt_, s_, seen_, sums_);
        std::printf("  %s%s\n", vs[i].name, vs[i].exact ? " (expected identical)" : " (may differ)");
        const bool same_all = same("q", ref_q, q_) & same("q_t", ref_qt, qt_) & same("amax", ref_seen, seen_) &
                              same("column sums", ref_sums, sums_);
        if (vs[i].exact) ok &= same_all;
      }
      for (int rep = 0; rep < 3; ++rep)
        for (const V& v : vs) row(v.name, bench::time_ms(iters, [&] { v.run(q, qt, s, seen, sums); }), bytes);
    };
    study("forward GELU (E4M3, q and q_t)", fwd_variants, 4);
    study("backward GELU gradient (E5M2, q and q_t, column sums)", bwd_variants, 6);
    study("plain quantization (E5M2, q and q_t, column sums)", plain_variants, 4);
    study("plain quantization (E4M3, q and q_t)", plain_e4_variants, 4);
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  std::printf(ok ? "outputs: identical to the library kernel's\n" : "outputs: DIFFER from the library kernel's\n");
  return ok ? 0 : 2;
}
