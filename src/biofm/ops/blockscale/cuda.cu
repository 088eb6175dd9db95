// Block-scaled numerics on the GPU, for Hopper's emulated Float8BlockScaling / MXFP8 / NVFP4:
// the same arithmetic as cpu.cpp (the reference, definitions in op.h) in the same order, so the
// results agree bit for bit (tests/cuda/fp8_blockscale_test.cpp). One thread block per scale
// block: simple rather than fast (emulation carries no speedup anyway).
#include <cuda_fp8.h>

#include <cfloat>

#include "biofm/ops/blockscale/op.h"
#include "biofm/ops/cuda_util.cuh"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

constexpr int kThreads = 128;
constexpr float kE2m1Max = 6.0f;
__constant__ float kE2m1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

struct Params {
  int64_t R, C;
  int br, bc;
  BlockScaleKind kind;
  Fp8Type fp8;
  bool stochastic;
  uint64_t seed, stream;
};

// core/rng.h's Philox4x32-10 draw, first word, as a uniform in [0, 1) (stochastic_uniform).
__device__ float philox_uniform(uint64_t seed, uint32_t stream_id, uint64_t index, uint32_t offset) {
  uint32_t c0 = uint32_t(index), c1 = uint32_t(index >> 32), c2 = offset, c3 = stream_id;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32) ^ (stream_id * 0x85EBCA6Bu);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1), n2 = uint32_t(p0 >> 32) ^ c3 ^ k1,
                   n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return float(c0 >> 8) * (1.0f / 16777216.0f);
}

__device__ float fp8_round_dev(float v, Fp8Type t) {
  if (!isfinite(v)) return __int_as_float(0x7fc00000);
  const __nv_fp8_interpretation_t k = t == Fp8Type::E4M3 ? __NV_E4M3 : __NV_E5M2;
  const __nv_fp8_storage_t c = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, k);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, k)));
}

__device__ float e2m1_round_dev(float v) {
  if (isnan(v)) return v;
  const float a = fabsf(v);
  if (a >= kE2m1Max) return copysignf(kE2m1Max, v);
  int best = 0;
  for (int i = 1; i < 8; ++i) {
    const float d = fabsf(kE2m1Values[i] - a), db = fabsf(kE2m1Values[best] - a);
    if (d < db || (d == db && (i & 1) == 0)) best = i;
  }
  return copysignf(kE2m1Values[best], v);
}

__device__ float e2m1_stochastic_dev(float v, float u) {
  if (isnan(v)) return v;
  const float a = fabsf(v);
  float l = kE2m1Max, h = kE2m1Max;
  for (int i = 0; i < 8; ++i)
    if (kE2m1Values[i] >= a) {
      h = kE2m1Values[i];
      l = (kE2m1Values[i] == a || i == 0) ? h : kE2m1Values[i - 1];
      break;
    }
  const float lo = v < 0 ? -h : l, hi = v < 0 ? -l : h;
  if (lo == hi) return lo;
  const float p_hi = (v - lo) / (hi - lo);
  return u < p_hi ? hi : lo;
}

__device__ float scale_f32_dev(float amax, float elem_max, bool pow2) {
  if (!(amax > 0.0f) || !isfinite(amax)) return 1.0f;
  float s = elem_max / amax;
  if (!isfinite(s)) s = FLT_MAX;
  if (pow2) {
    int e = 0;
    frexpf(s, &e);
    s = ldexpf(1.0f, e - 1);
  }
  return s;
}

__device__ float e8m0_scale_dev(float v) {  // e8m0_decode(e8m0_round_up(v))
  if (isnan(v)) return __int_as_float(0x7fc00000);
  if (!(v > 0.0f)) return ldexpf(1.0f, -127);
  if (isinf(v)) return ldexpf(1.0f, 127);
  int e = 0;
  const float m = frexpf(v, &e);
  int p = (m == 0.5f) ? e - 1 : e;
  p = max(-127, min(127, p));
  return ldexpf(1.0f, p);
}

template <class T>
__global__ void tensor_amax_kernel(const T* x, int64_t n, unsigned* bits) {
  float m = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(to_f32(x[i])));
  amax_reduce_into(bits, m);
}

template <class TI, class TO>
__global__ void __launch_bounds__(kThreads)
    block_fq_kernel(const TI* x, TO* out, Params p, const unsigned* tensor_amax_bits) {
  __shared__ float part[kThreads];
  __shared__ float enc_dec[2];
  const int64_t nbc = (p.C + p.bc - 1) / p.bc;
  const int64_t blk = blockIdx.x;
  const int64_t r0 = (blk / nbc) * p.br, c0 = (blk % nbc) * p.bc;
  const int rows = int(min(int64_t(p.br), p.R - r0)), cols = int(min(int64_t(p.bc), p.C - c0));
  const int n = rows * cols;
  float m = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    m = fmaxf(m, fabsf(to_f32(x[(r0 + i / cols) * p.C + c0 + i % cols])));
  part[threadIdx.x] = m;
  __syncthreads();
  for (int off = kThreads / 2; off > 0; off /= 2) {
    if (threadIdx.x < off) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + off]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float amax = part[0];
    float enc = 1.0f, dec = 1.0f;
    const float elem_max = p.kind == BlockScaleKind::Nvfp4 ? kE2m1Max : (p.fp8 == Fp8Type::E4M3 ? 448.0f : 57344.0f);
    if (p.kind == BlockScaleKind::F32 || p.kind == BlockScaleKind::F32Pow2) {
      enc = scale_f32_dev(amax, elem_max, p.kind == BlockScaleKind::F32Pow2);
      dec = 1.0f / enc;
    } else if (p.kind == BlockScaleKind::E8M0) {
      dec = e8m0_scale_dev(amax / elem_max);
      enc = 1.0f / dec;
    } else {
      const float tensor_enc = scale_f32_dev(__uint_as_float(*tensor_amax_bits), 448.0f * kE2m1Max, false);
      const float sb = fp8_round_dev(amax / kE2m1Max * tensor_enc, Fp8Type::E4M3);
      enc = sb > 0.0f ? tensor_enc / sb : 0.0f;
      dec = sb / tensor_enc;
    }
    enc_dec[0] = enc;
    enc_dec[1] = dec;
  }
  __syncthreads();
  const float enc = enc_dec[0], dec = enc_dec[1];
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t idx = (r0 + i / cols) * p.C + c0 + i % cols;
    const float s = __fmul_rn(to_f32(x[idx]), enc);
    float e;
    if (p.kind != BlockScaleKind::Nvfp4)
      e = fp8_round_dev(s, p.fp8);
    else if (p.stochastic)
      e = e2m1_stochastic_dev(fmaxf(-kE2m1Max, fminf(kE2m1Max, s)),
                              philox_uniform(p.seed, 0x5F4u, p.stream, uint32_t(idx)));
    else
      e = e2m1_round_dev(s);
    out[idx] = from_f32<TO>(__fmul_rn(e, dec));
  }
}

struct Signs {
  float v[16];
};

template <class T>
__global__ void hadamard16_kernel(const T* x, T* out, int64_t R, int64_t C, Signs sign) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= (R / 16) * C) return;
  const int64_t g = (t / C) * 16, c = t % C;
  float col[16];
  for (int i = 0; i < 16; ++i) col[i] = __fmul_rn(to_f32(x[(g + i) * C + c]), sign.v[i]);
  for (int i = 0; i < 16; ++i) {
    float s = 0.0f;
    for (int j = 0; j < 16; ++j) s = __fadd_rn(s, (__popc(unsigned(i & j)) & 1) ? -col[j] : col[j]);
    out[(g + i) * C + c] = from_f32<T>(__fmul_rn(0.25f, s));
  }
}


// ---- Float8BlockScaling codes for the native block-scaled GEMMs (op.h: fp8_block_quantize).
// One thread block per 128x128 tile of x, staged in shared memory; one warp per row of the tile for the row-wise
// codes, one warp per column for the transposed ones. Same arithmetic as the CPU's. (A first
// version loaded 8 consecutive elements per thread: 8-way bank conflicts on the shared-memory
// stores made it 2.7x slower than the per-tensor quantization; 26 ms of a 158 ms Llama 1B step.)

constexpr int kTile = 128, kTileThreads = 256;
// The tile holds x's own type (bf16 halves the shared memory: twice the blocks per SM). Rows
// padded so that a warp reading a column (rows lane + 32j) hits 32 different banks.
template <class T>
constexpr int kTilePitch = sizeof(T) == 4 ? kTile + 1 : kTile + 2;
template <class T>
constexpr size_t kTileBytes = size_t(kTile) * kTilePitch<T> * sizeof(T);

struct BlockCodesArgs {
  int64_t R, C, Rp;
  Fp8Type type;
  bool pow2, weight_2d;
  uint8_t *row_codes, *col_codes;  // [R, C], [C, Rp] (either may be null)
  float *row_scale_inv, *col_scale_inv;  // [C/128, R4], [Rp/128, C]
  float* row_tail_scale_inv;             // [C/128, 4] when R % 4 != 0
};

// Four codes in one word (byte j = code of v[j]), two per conversion instruction; non-finite
// values get fp8_encode's NaN code (the conversion would saturate infinities).
__device__ __forceinline__ uint32_t fp8_codes4_dev(const float (&v)[4], float enc, Fp8Type t) {
  const __nv_fp8_interpretation_t k = t == Fp8Type::E4M3 ? __NV_E4M3 : __NV_E5M2;
  uint32_t word = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float a = v[2 * h] * enc, b = v[2 * h + 1] * enc;
    uint32_t pair = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, k);
    if (!isfinite(a)) pair = (pair & 0xff00u) | 0x7fu;
    if (!isfinite(b)) pair = (pair & 0x00ffu) | 0x7f00u;
    word |= pair << (16 * h);
  }
  return word;
}

// Row r of the tile: its codes (1x128 along C) with scale 1/enc, by one warp (lane holds the
// four elements 4·lane .. 4·lane + 3: one 4-byte store each).
__device__ __forceinline__ void write_row_codes(const BlockCodesArgs& a, const float (&v)[4], float enc, int64_t row,
                                                int64_t kb, int64_t c0, int lane) {
  reinterpret_cast<uint32_t*>(a.row_codes + row * a.C + c0)[lane] = fp8_codes4_dev(v, enc, a.type);
  const int64_t R4 = a.R - a.R % 4;
  if (lane == 0 && row < R4) a.row_scale_inv[kb * R4 + row] = 1.0f / enc;
  if (lane == 0 && R4 != a.R && row >= a.R - 4) a.row_tail_scale_inv[kb * 4 + row - (a.R - 4)] = 1.0f / enc;
}

template <class T>
__global__ void __launch_bounds__(kTileThreads) fp8_block_codes_kernel(const T* x, BlockCodesArgs a) {
  extern __shared__ __align__(16) unsigned char tile_bytes[];
  T* tile = reinterpret_cast<T*>(tile_bytes);  // [kTile][kTilePitch<T>]
  constexpr int P = kTilePitch<T>;
  __shared__ float warp_amax[kTileThreads / 32];
  constexpr int kWarps = kTileThreads / 32;
  const int64_t rb = blockIdx.x, kb = blockIdx.y, r0 = rb * kTile, c0 = kb * kTile;  // (rows on x: up to 2^31 tiles)
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float elem_max = a.type == Fp8Type::E4M3 ? 448.0f : 57344.0f;
  // Rows: one warp per row (lane holds columns 4·lane .. 4·lane + 3: one vector load); the row
  // codes come straight from the registers, except for weights, whose scale needs the whole
  // block first. Rows past R read as zeros.
  float m = 0.0f;
#pragma unroll 4
  for (int r = warp; r < kTile; r += kWarps) {
    const int64_t row = r0 + r;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f}, rm = 0.0f;
    if (row < a.R) load_vec<4>(v, x + row * a.C + c0 + 4 * lane);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      tile[r * P + 4 * lane + j] = from_f32<T>(v[j]);  // exact: v came from a T
      rm = fmaxf(rm, fabsf(v[j]));
    }
    rm = warp_max(rm);
    m = fmaxf(m, rm);
    if (a.row_codes && !a.weight_2d && row < a.R) write_row_codes(a, v, scale_f32_dev(rm, elem_max, a.pow2), row, kb, c0, lane);
  }
  if (lane == 0) warp_amax[warp] = m;
  __syncthreads();
  float enc2d = 1.0f;  // weight_2d: the scale of the whole block
  if (a.weight_2d) {
    float bm = 0.0f;
    for (int w = 0; w < kWarps; ++w) bm = fmaxf(bm, warp_amax[w]);
    enc2d = scale_f32_dev(bm, elem_max, a.pow2);
    if (a.row_codes)
      for (int r = warp; r < kTile; r += kWarps) {
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = to_f32(tile[r * P + 4 * lane + j]);
        write_row_codes(a, v, enc2d, r0 + r, kb, c0, lane);
      }
  }
  // Columns: one warp per column (rows lane + 32j; the padded pitch makes these reads
  // conflict-free), written transposed.
  if (a.col_codes) {
    for (int c = warp; c < kTile; c += kWarps) {
      float v[4], cm = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[j] = to_f32(tile[(lane + 32 * j) * P + c]);
        cm = fmaxf(cm, fabsf(v[j]));
      }
      const float enc = a.weight_2d ? enc2d : scale_f32_dev(warp_max(cm), elem_max, a.pow2);
      uint8_t* q = a.col_codes + (c0 + c) * a.Rp + r0;
      const uint32_t codes = fp8_codes4_dev(v, enc, a.type);  // (rows past R hold zeros: code 0)
#pragma unroll
      for (int j = 0; j < 4; ++j) q[lane + 32 * j] = uint8_t(codes >> (8 * j));
      if (lane == 0) a.col_scale_inv[rb * a.C + c0 + c] = 1.0f / enc;
    }
  }
}

}  // namespace

void block_fake_quantize(Tensor& out, const Tensor& x, const BlockQuant& q) {
  const char* op = "block_fake_quantize";
  require_float(x, op, "x");
  require_float(out, op, "out");
  if (out.numel() != x.numel()) fail(op, ": out ", out.describe(), " must match x ", x.describe());
  if (q.block_rows < 1 || q.block_cols < 1) fail(op, ": block sizes must be positive");
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = C ? x.numel() / C : 0;
  if (R == 0 || C == 0) return;
  const Params p{R, C, q.block_rows, q.block_cols, q.kind, q.fp8, q.stochastic, q.seed, q.stream};
  const int64_t blocks = ((R + p.br - 1) / p.br) * ((C + p.bc - 1) / p.bc);
  if (blocks > int64_t(INT32_MAX)) fail(op, ": too many blocks (", blocks, ")");
  cudaStream_t st = cuda_ctx::stream();
  Tensor amax;
  if (q.kind == BlockScaleKind::Nvfp4) amax = Tensor::empty({1}, DType::F32, Device::CUDA);
  dispatch_float(x.dtype(), op, [&](auto ti) {
    using TI = typename decltype(ti)::type;
    const TI* xp = static_cast<const TI*>(x.raw());
    if (amax.defined()) {
      tensor_amax_kernel<TI><<<grid_for(x.numel(), 256 * 8, sm_waves(4)), 256, 0, st>>>(xp, x.numel(),
                                                                                     amax_accumulator(amax, op));
      BIOFM_CUDA_LAUNCH_CHECK();
    }
    const unsigned* bits = amax.defined() ? static_cast<const unsigned*>(amax.raw()) : nullptr;
    dispatch_float(out.dtype(), op, [&](auto to) {
      using TO = typename decltype(to)::type;
      block_fq_kernel<TI, TO><<<unsigned(blocks), kThreads, 0, st>>>(xp, static_cast<TO*>(out.raw()), p, bits);
      BIOFM_CUDA_LAUNCH_CHECK();
    });
  });
}

void hadamard16_rows(Tensor& out, const Tensor& x, uint64_t seed) {
  const char* op = "hadamard16_rows";
  require_float(x, op, "x");
  require_dtype(out, x.dtype(), op, "out");
  if (out.numel() != x.numel()) fail(op, ": out ", out.describe(), " must match x ", x.describe());
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = C ? x.numel() / C : 0;
  if (R % 16) fail(op, ": x needs a multiple of 16 rows, got ", x.describe());
  const int64_t n = (R / 16) * C;
  if (n == 0) return;
  Signs s;
  hadamard16_signs(seed, s.v);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    hadamard16_kernel<T><<<unsigned((n + 255) / 256), 256, 0, cuda_ctx::stream()>>>(
        static_cast<const T*>(x.raw()), static_cast<T*>(out.raw()), R, C, s);
  });
  BIOFM_CUDA_LAUNCH_CHECK();
}

void fp8_block_quantize(Fp8BlockCodes* rows, Fp8BlockCodes* cols, const Tensor& x, Fp8Type t, bool pow2_scales,
                        bool weight_2d) {
  const char* op = "fp8_block_quantize";
  require_float(x, op, "x");
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = C ? x.numel() / C : 0;
  if (C % kTile) fail(op, ": x needs a multiple of 128 columns, got ", x.describe());
  if (weight_2d && R % kTile) fail(op, ": 128x128 blocks need a multiple of 128 rows, got ", x.describe());
  if (!aligned16(x.raw())) fail(op, ": x must be 16-byte aligned");
  const int64_t Rp = ceil_div(R, kTile) * kTile;
  if (C / kTile > 65535) fail(op, ": too many columns (", C, ")");
  BlockCodesArgs a{R, C, Rp, t, pow2_scales, weight_2d, nullptr, nullptr, nullptr, nullptr, nullptr};
  if (rows) {
    const int64_t R4 = R - R % 4;
    if (R % 4 && R < 4) fail(op, ": ", R, " rows: a row count that is not a multiple of 4 must be at least 4");
    rows->codes = Tensor::empty({R, C}, DType::U8, Device::CUDA);
    rows->scale_inv = Tensor::empty({C / kTile, R4}, DType::F32, Device::CUDA);
    a.row_codes = static_cast<uint8_t*>(rows->codes.raw());
    a.row_scale_inv = rows->scale_inv.f32();
    if (R4 != R) {
      rows->tail_scale_inv = Tensor::empty({C / kTile, 4}, DType::F32, Device::CUDA);
      a.row_tail_scale_inv = rows->tail_scale_inv.f32();
    }
  }
  if (cols) {
    cols->codes = Tensor::empty({C, Rp}, DType::U8, Device::CUDA);
    cols->scale_inv = Tensor::empty({Rp / kTile, C}, DType::F32, Device::CUDA);
    a.col_codes = static_cast<uint8_t*>(cols->codes.raw());
    a.col_scale_inv = cols->scale_inv.f32();
  }
  if (R == 0 || (!rows && !cols)) return;
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    static const bool smem_raised = [] {  // more than 48 KB of dynamic shared memory, once per type
      BIOFM_CUDA_CHECK(cudaFuncSetAttribute(fp8_block_codes_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(kTileBytes<T>)));
      return true;
    }();
    (void)smem_raised;
    const dim3 grid(unsigned(Rp / kTile), unsigned(C / kTile));
    fp8_block_codes_kernel<T><<<grid, kTileThreads, kTileBytes<T>, cuda_ctx::stream()>>>(static_cast<const T*>(x.raw()), a);
  });
  BIOFM_CUDA_LAUNCH_CHECK();
}

}  // namespace biofm::ops::cuda
