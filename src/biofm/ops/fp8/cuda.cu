// FP8 quantization on the GPU: one reduction kernel for amax, then one tiled kernel that
// reads x once and writes the row-major codes, the transposed codes, or both. The scale is
// computed on the device from amax (no host read); scale_inv goes to a device float that the
// FP8 GEMM reads through its scale pointer.
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <type_traits>
#include <utility>

#include "biofm/ops/activation/gelu_math.cuh"
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/fp8/codes.cuh"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/cublaslt_plans_cuda.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

using fp8_codes::kTile;         // a block quantizes a 64 x 64 tile of x
constexpr int kThreads = 256;   // 4 threads per tile row, 16 elements each


// x is 16-byte aligned (checked by the caller).
template <class T>
__global__ void amax_kernel(const T* x, int64_t n, unsigned* amax_bits) {
  float m = 0.0f;
  fp8_codes::for_each_abs(x, n, /*vec=*/true, [&](float a) { m = fmaxf(m, a); });
  amax_reduce_into(amax_bits, m);
}

using fp8_codes::encode;

// What the quantize kernel quantizes: x as read, or the MLP's GELU computed from pre (and x =
// dact for its gradient), rounded to T as the GELU kernels store it (fp8_quantize_gelu).
enum class Src { X, Gelu, GeluGrad };

// x[R, C] (C a multiple of 16) -> q[R, C] and/or q_t[C, Rp] (Rp a multiple of 16, rows >= R
// of x read as zero). Block (bx, by) takes the 64 x 64 tile (tx0 + bx, ty0 + by). kEdge: the
// tiles may cross R or C (bounds checked); without it they lie wholly inside x (launch() sends
// the inside tiles and the edge strips to separate launches: a bounds guard in every tile cost
// 2-10 us per call at [16k, 5120] even where no tile crosses, session 29). kSrc other than X:
// the values come from pre (and x), and their max |.| is max-folded into seen_bits. record_bits (kSrc X):
// max-folded with the largest bit pattern of |x| (NaN wins), as fp8_amax_record's kernel does.
// kBoth: q and q_t both given and no record_bits, known at compile time (the MLP's and the
// gradients' case): the runtime checks of those pointers cost 4-12 us per call at [16k, 5120]
// (a copy of this kernel without them, session 29 run G).
template <class T, Fp8Type kType, bool kColSums, Src kSrc, bool kEdge, bool kBoth>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const T* x, int64_t R, int64_t C, int64_t Rp, int64_t tx0, int64_t ty0, const unsigned* amax_bits,
                    float fmax, uint8_t* q, uint8_t* q_t, float* scale_inv, float* col_partial, const T* pre,
                    unsigned* seen_bits, unsigned* record_bits) {
  // 16-byte rows of codes; 80 bytes per tile row keeps every row 16-byte aligned.
  __shared__ __align__(16) uint8_t tile[kTile][kTile + 16];
  // x itself when column sums are wanted (kColSums: col_partial set); rows padded by 16 bytes
  // (aligned vector stores; rows 4 apart start 4 banks apart, so the 4 lanes of a column do not
  // collide: bf16 conflict-free, f32 at most 2-way).
  __shared__ __align__(16) T vals[kColSums ? kTile : 1][kColSums ? kTile + 16 / sizeof(T) : 8];
  const float scale = fp8_codes::scale_for(__uint_as_float(*amax_bits), fmax);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = 1.0f / scale;  // (each launch: same value)

  const int64_t ty = blockIdx.y + ty0, row0 = ty * kTile, col0 = (blockIdx.x + tx0) * kTile;
  float seen = 0.0f;  // kSrc: max |src| of this thread's values
  unsigned recorded = 0;  // record_bits: max bit pattern of |x| over this thread's values
  // This thread's 16 values. A tile crossing R or C (kEdge) reads zeros outside (C % 16 == 0: the
  // 16 columns are all in range or all out): zeros give zero codes, add nothing to the sums and do
  // not raise the maxima. The arithmetic is emitted once per kernel (two inlined copies, one per
  // case, ran 6 / 24 us slower per call at [16k, 5120] on the H200: session 29).
  const int r = threadIdx.x >> 2, c = (threadIdx.x & 3) * 16;
  const int64_t gr = row0 + r, gc = col0 + c;
  const bool mine = !kEdge || (gr < R && gc < C);
  const bool want_q = kBoth || q != nullptr, want_q_t = kBoth || q_t != nullptr;
  const bool record = !kBoth && record_bits != nullptr;
  float v[16];
  if constexpr (kSrc == Src::X) {
    if (mine) {
      load_vec<16>(v, x + gr * C + gc);
      if (record)
#pragma unroll
        for (int i = 0; i < 16; ++i) recorded = max(recorded, __float_as_uint(fabsf(v[i])));
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) v[i] = 0.0f;
    }
  } else {
    float p[16];
    if (mine) {
      load_vec<16>(p, pre + gr * C + gc);
      if constexpr (kSrc == Src::GeluGrad) load_vec<16>(v, x + gr * C + gc);
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) p[i] = v[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float s;
      if constexpr (kSrc == Src::Gelu)
        s = gelu_math::gelu_erf(p[i]);
      else
        s = v[i] * gelu_math::gelu_erf_grad(p[i]);
      v[i] = to_f32(from_f32<T>(s));  // as the GELU kernel would store it
      seen = fmaxf(seen, fabsf(v[i]));
    }
  }
  Pack<uint8_t, 16> codes;
#pragma unroll
  for (int i = 0; i < 16; ++i) codes.v[i] = encode<kType>(v[i] * scale);
  if (want_q && mine) *reinterpret_cast<Pack<uint8_t, 16>*>(q + gr * C + gc) = codes;
  // (columns past C land in the tile but are never stored; rows past R are the zero codes of q_t's padding)
  *reinterpret_cast<Pack<uint8_t, 16>*>(&tile[r][fp8_codes::tile_col(r, c)]) = codes;
  // x as read, for the column sums below (zeros past R and C).
  if constexpr (kColSums) store_vec<16>(&vals[r][c], v);
  // kSrc: the warps' maxima meet in shared memory, and warp 0 sends one atomic for the block at
  // the very end (its read of the accumulator waits on L2; before the tile sync, that wait held
  // every warp of the block: ~20 us per call at [16k, 5120], session 23).
  __shared__ float warp_seen[kSrc != Src::X ? kThreads / 32 : 1];
  if constexpr (kSrc != Src::X) {
    seen = warp_max(seen);
    if ((threadIdx.x & 31) == 0) warp_seen[threadIdx.x >> 5] = seen;
  }
  if (record) fp8_codes::record_bits_into(record_bits, recorded);  // (uniform over the grid)
  if (kSrc == Src::X && !want_q_t && !kColSums) return;  // uniform over the grid
  __syncthreads();
  if (want_q_t) fp8_codes::store_tile_transposed(tile, q_t, C, Rp, row0, col0);
  if constexpr (kColSums) {
    // The tile's column sums (the bias gradient of an output gradient): the 4 threads of column
    // j take rows k, k + 4, ... (k = thread & 3; rows 4 apart fall in different shared-memory
    // banks), then add across the 4 lanes; a fixed order, so the result is deterministic.
    const int j = threadIdx.x >> 2, k = threadIdx.x & 3;
    const int64_t gc = col0 + j;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kTile / 4; ++i) sum += to_f32(vals[k + 4 * i][j]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (k == 0 && gc < C) col_partial[ty * C + gc] = sum;
  }
  if constexpr (kSrc != Src::X)
    if (threadIdx.x < 32) amax_reduce_into(seen_bits, threadIdx.x < kThreads / 32 ? warp_seen[threadIdx.x] : 0.0f);
}

template <class T>
void launch(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& x, Fp8Type t, int64_t R, int64_t C,
            const Tensor& given_amax, const Tensor& col_sums, Src src = Src::X, const Tensor& pre = Tensor(),
            const Tensor& seen_record = Tensor(), const Tensor& record = Tensor()) {
  cudaStream_t st = cuda_ctx::stream();
  const T* xp = static_cast<const T*>(x.raw());
  Tensor own_amax;
  if (!given_amax.defined()) {
    own_amax = Tensor::empty({1}, DType::F32, Device::CUDA);
    const int64_t n = R * C;
    amax_kernel<T><<<grid_for(n / (16 / int64_t(sizeof(T))) + 1, 256, sm_waves(8)), 256, 0, st>>>(
        xp, n, amax_accumulator(own_amax, "fp8_quantize"));
    BIOFM_CUDA_LAUNCH_CHECK();
  }
  const unsigned* amax = static_cast<const unsigned*>((given_amax.defined() ? given_amax : own_amax).raw());
  const int64_t Rp = q_t.defined() ? q_t.size(1) : R;
  const int64_t rows = std::max(R, Rp);
  if (ceil_div(rows, kTile) > 65535) fail("fp8_quantize: ", R, " rows is more than this kernel handles");
  // Tiles: tiles_x by tiles_y; the first full_x by full_y lie wholly inside x (rows past R, up to
  // Rp, are q_t's zero padding: edge tiles). Those go to one launch without bounds checks, the
  // column strip past full_x and the row strip past full_y (if any) to launches with them.
  const int64_t tiles_x = ceil_div(C, kTile), tiles_y = std::max<int64_t>(ceil_div(rows, kTile), 1);
  const int64_t full_x = C / kTile, full_y = R / kTile;
  uint8_t* qp = q.defined() ? static_cast<uint8_t*>(q.raw()) : nullptr;
  uint8_t* qtp = q_t.defined() ? static_cast<uint8_t*>(q_t.raw()) : nullptr;
  const float fmax = fp8_max(t);
  // Column sums: one row of partial sums per row of tiles, then a deterministic finishing pass.
  std::optional<Scratch> partial;
  if (col_sums.defined()) partial.emplace(size_t(tiles_y) * size_t(C) * sizeof(float));
  float* pp = partial ? partial->as<float>() : nullptr;
  const T* prep = pre.defined() ? static_cast<const T*>(pre.raw()) : nullptr;
  unsigned* seen = src == Src::X ? nullptr : amax_record_slot(seen_record, "fp8_quantize_gelu");
  unsigned* rec = record.defined() ? static_cast<unsigned*>(record.raw()) : nullptr;
  auto go = [&](auto type_c, auto sums_c) {
    auto run = [&](auto src_c) {
      auto tiles = [&](auto edge_c, int64_t nx, int64_t ny, int64_t tx0, int64_t ty0) {
        if (nx <= 0 || ny <= 0) return;
        auto go_kernel = [&](auto both_c) {
          quantize_kernel<T, decltype(type_c)::value, decltype(sums_c)::value, decltype(src_c)::value,
                          decltype(edge_c)::value, decltype(both_c)::value>
              <<<dim3(unsigned(nx), unsigned(ny)), kThreads, 0, st>>>(xp, R, C, Rp, tx0, ty0, amax, fmax, qp, qtp,
                                                                      scale_inv.f32(), pp, prep, seen, rec);
        };
        if constexpr (decltype(edge_c)::value)
          go_kernel(std::false_type{});  // (the edge strips are small: they keep the checks)
        else
          qp && qtp && !rec ? go_kernel(std::true_type{}) : go_kernel(std::false_type{});
        BIOFM_CUDA_LAUNCH_CHECK();
      };
      tiles(std::false_type{}, full_x, full_y, 0, 0);
      tiles(std::true_type{}, tiles_x - full_x, tiles_y, full_x, 0);
      tiles(std::true_type{}, full_x, tiles_y - full_y, 0, full_y);
    };
    if (src == Src::X) run(std::integral_constant<Src, Src::X>{});
    if (src == Src::Gelu) run(std::integral_constant<Src, Src::Gelu>{});
    if (src == Src::GeluGrad) run(std::integral_constant<Src, Src::GeluGrad>{});
  };
  using E4 = std::integral_constant<Fp8Type, Fp8Type::E4M3>;
  using E5 = std::integral_constant<Fp8Type, Fp8Type::E5M2>;
  if (t == Fp8Type::E4M3)
    pp ? go(E4{}, std::true_type{}) : go(E4{}, std::false_type{});
  else
    pp ? go(E5{}, std::true_type{}) : go(E5{}, std::false_type{});
  if (pp) gemm_detail::column_partials_into(col_sums.f32(), C, pp, tiles_y);
}

}  // namespace

namespace {
// The checks fp8_quantize and fp8_quantize_gelu share, with x the tensor whose values (or whose
// GELU) are quantized; they return x's rows and columns.
std::pair<int64_t, int64_t> check_quantize(const char* op, const Tensor& q, const Tensor& q_t, const Tensor& scale_inv,
                                           const Tensor& x, const Tensor& amax, const Tensor& col_sums) {
  require_float(x, op, "x");
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = rows_of(x, C, op, "x");
  require_dtype(scale_inv, DType::F32, op, "scale_inv");
  if (scale_inv.numel() != 1) fail(op, ": scale_inv must have one element, got ", scale_inv.describe());
  if (C % 16 || !aligned(x.raw(), 16))
    fail(op, ": x needs a last dimension that is a multiple of 16 and a 16-byte aligned start, got ", x.describe());
  if (q.defined()) {
    require_dtype(q, DType::U8, op, "q");
    if (q.numel() != R * C || !aligned(q.raw(), 16))
      fail(op, ": q ", q.describe(), " must hold x ", x.describe(), " and start 16-byte aligned");
  }
  if (q_t.defined()) {
    require_dtype(q_t, DType::U8, op, "q_t");
    if (q_t.dim() != 2 || q_t.size(0) != C || q_t.size(1) < R || q_t.size(1) % 16 || !aligned(q_t.raw(), 16))
      fail(op, ": q_t must be [", C, ", Rp] with Rp >= ", R, " a multiple of 16, 16-byte aligned, got ",
           q_t.describe());
  }
  if (amax.defined()) {
    require_dtype(amax, DType::F32, op, "amax");
    if (amax.numel() != 1) fail(op, ": amax must have one element, got ", amax.describe());
  }
  if (col_sums.defined()) {
    require_dtype(col_sums, DType::F32, op, "col_sums");
    if (col_sums.device() != Device::CUDA || col_sums.numel() != C)
      fail(op, ": col_sums must be a CUDA F32 tensor of ", C, " elements, got ", col_sums.describe());
  }
  return {R, C};
}
}  // namespace

void fp8_quantize(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& x, Fp8Type t, const Tensor& amax,
                  const Tensor& col_sums, const Tensor& record) {
  const auto [R, C] = check_quantize("fp8_quantize", q, q_t, scale_inv, x, amax, col_sums);
  if (record.defined()) {
    require_cuda(record, "fp8_quantize", "record");
    require_dtype(record, DType::F32, "fp8_quantize", "record");
    if (record.numel() < 1) fail("fp8_quantize: record must be a history row, got ", record.describe());
  }
  if (C == 0) return;
  dispatch_float(x.dtype(), "fp8_quantize", [&](auto tag) {
    launch<typename decltype(tag)::type>(q, q_t, scale_inv, x, t, R, C, amax, col_sums, Src::X, Tensor(), Tensor(),
                                         record);
  });
}

namespace {
std::atomic<int64_t> g_gelu_calls{0};
}  // namespace

int64_t fp8_quantize_gelu_calls() { return g_gelu_calls.load(); }

void fp8_quantize_gelu(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& pre, const Tensor& dact, Fp8Type t,
                       const Tensor& amax, const Tensor& record, const Tensor& col_sums) {
  const char* op = "fp8_quantize_gelu";
  if (!amax.defined() || !record.defined()) fail(op, ": amax (the delayed scale) and record are required");
  require_cuda(record, op, "record");
  amax_record_slot(record, op);  // (checked before anything runs)
  if (dact.defined()) {
    require_like(dact, pre, op, "dact", "pre");
    if (!aligned(dact.raw(), 16)) fail(op, ": dact must start 16-byte aligned, got ", dact.describe());
  }
  const auto [R, C] = check_quantize(op, q, q_t, scale_inv, pre, amax, col_sums);
  ++g_gelu_calls;
  if (C == 0) return;  // (nothing seen: the record is left as it is)
  dispatch_float(pre.dtype(), op, [&](auto tag) {
    launch<typename decltype(tag)::type>(q, q_t, scale_inv, dact.defined() ? dact : pre, t, R, C, amax, col_sums,
                                         dact.defined() ? Src::GeluGrad : Src::Gelu, pre, record);
  });
}

namespace {

// One thread per element of x, consecutive threads along x's row: codes[r·row_stride +
// c·col_stride] (transposed codes, a fallback path, are read with a stride of Rp; FP8
// attention's row-major outputs contiguously).
template <class T, Fp8Type kType>
__global__ void dequantize_kernel(T* x, const uint8_t* codes, const float* scale_inv, int64_t R, int64_t C,
                                  int64_t row_stride, int64_t col_stride) {
  const int64_t n = R * C, stride = int64_t(gridDim.x) * blockDim.x;
  const float inv = *scale_inv;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / C, c = i % C;
    const __nv_fp8_storage_t code = codes[r * row_stride + c * col_stride];
    const __half_raw h = __nv_cvt_fp8_to_halfraw(code, kType == Fp8Type::E4M3 ? __NV_E4M3 : __NV_E5M2);
    x[i] = from_f32<T>(__half2float(__half(h)) * inv);
  }
}

// Row-major codes, 8 per thread (one 8-byte load, 16 or 32 bytes stored): FP8 attention's large
// outputs ([tokens, heads·128]), without the index arithmetic above. n8 = elements / 8.
template <class T, Fp8Type kType>
__global__ void dequantize_flat8_kernel(T* x, const uint8_t* codes, const float* scale_inv, int64_t n8) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const float inv = *scale_inv;
  constexpr __nv_fp8_interpretation_t kInterp = kType == Fp8Type::E4M3 ? __NV_E4M3 : __NV_E5M2;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n8; i += stride) {
    const uint2 c = reinterpret_cast<const uint2*>(codes)[i];
    const __nv_fp8x2_storage_t* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&c);
    float v[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[j], kInterp)));
      v[2 * j] = f.x * inv;
      v[2 * j + 1] = f.y * inv;
    }
    store_vec<8>(x + i * 8, v);
  }
}

void launch_dequantize(Tensor& x, const uint8_t* codes, int64_t row_stride, int64_t col_stride,
                       const Tensor& scale_inv, Fp8Type t, const char* op) {
  const int64_t R = x.size(0), C = x.size(1);
  if (R * C == 0) return;
  if (col_stride == 1 && row_stride == C && (R * C) % 8 == 0 && reinterpret_cast<uintptr_t>(codes) % 8 == 0 &&
      reinterpret_cast<uintptr_t>(x.raw()) % 16 == 0) {
    const int64_t n8 = R * C / 8;
    const unsigned blocks = unsigned(std::min<int64_t>((n8 + kThreads - 1) / kThreads, 8192));
    dispatch_float(x.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto* kernel =
          t == Fp8Type::E4M3 ? dequantize_flat8_kernel<T, Fp8Type::E4M3> : dequantize_flat8_kernel<T, Fp8Type::E5M2>;
      kernel<<<blocks, kThreads, 0, cuda_ctx::stream()>>>(static_cast<T*>(x.raw()), codes, scale_inv.f32(), n8);
      BIOFM_CUDA_LAUNCH_CHECK();
    });
    return;
  }
  const unsigned blocks = unsigned(std::min<int64_t>((R * C + kThreads - 1) / kThreads, 4096));
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* kernel = t == Fp8Type::E4M3 ? dequantize_kernel<T, Fp8Type::E4M3> : dequantize_kernel<T, Fp8Type::E5M2>;
    kernel<<<blocks, kThreads, 0, cuda_ctx::stream()>>>(static_cast<T*>(x.raw()), codes, scale_inv.f32(), R, C,
                                                       row_stride, col_stride);
    BIOFM_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

void fp8_dequantize_transposed(Tensor& x, const Tensor& q_t, const Tensor& scale_inv, Fp8Type t) {
  const char* op = "fp8_dequantize_transposed";
  require_float(x, op, "x");
  if (x.dim() != 2) fail(op, ": x must be [R, C], got ", x.describe());
  const int64_t R = x.size(0), C = x.size(1);
  require_cuda(x, op, "x");
  require_cuda(q_t, op, "q_t");
  require_cuda(scale_inv, op, "scale_inv");
  require_dtype(q_t, DType::U8, op, "q_t");
  if (q_t.dim() != 2 || q_t.size(0) != C || q_t.size(1) < R)
    fail(op, ": q_t must be [", C, ", Rp] with Rp >= ", R, ", got ", q_t.describe());
  require_dtype(scale_inv, DType::F32, op, "scale_inv");
  if (scale_inv.numel() != 1) fail(op, ": scale_inv must have one element, got ", scale_inv.describe());
  launch_dequantize(x, static_cast<const uint8_t*>(q_t.raw()), 1, q_t.size(1), scale_inv, t, op);
}

void fp8_dequantize(Tensor& x, const Tensor& q, const Tensor& scale_inv, Fp8Type t) {
  const char* op = "fp8_dequantize";
  require_float(x, op, "x");
  if (x.dim() != 2) fail(op, ": x must be [R, C], got ", x.describe());
  require_cuda(x, op, "x");
  require_cuda(q, op, "q");
  require_cuda(scale_inv, op, "scale_inv");
  require_dtype(q, DType::U8, op, "q");
  if (q.shape() != x.shape()) fail(op, ": q must be shaped like x ", x.describe(), ", got ", q.describe());
  require_dtype(scale_inv, DType::F32, op, "scale_inv");
  if (scale_inv.numel() != 1) fail(op, ": scale_inv must have one element, got ", scale_inv.describe());
  launch_dequantize(x, static_cast<const uint8_t*>(q.raw()), x.size(1), 1, scale_inv, t, op);
}

}  // namespace biofm::ops::cuda
