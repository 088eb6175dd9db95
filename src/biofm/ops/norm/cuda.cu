// LayerNorm and RMSNorm over the last dimension, CUDA.
//
// Layout: a row of C features is owned by a group of `tpr` threads (a multiple of 32, at most
// 512); a block holds `rpb` such groups (about 256 threads). Each thread keeps up to MAXC chunks
// of VEC consecutive features (VEC = 8 with 16-byte loads when C % 8 == 0 and every pointer is
// 16-byte aligned, else 1) in registers, so a row is read from memory once: the statistics are
// computed from registers (mean first, then the centred variance, which keeps fp32 exact for
// rows with a large mean) and the output is written from them. MAXC trades registers (and so
// resident threads) against threads per row (a row of one warp needs no barrier); it is chosen
// per C by pick_chunks (measured on H100, docs/PERFORMANCE.md) unless ops.norm_chunks sets it.
// Register caching bounds C: 32768 (forward) and 16384 (backward) with VEC = 8, 4096 otherwise.
//
// Backward computes dx in the same single read of x and dout, with both row reductions
// (Σ dout·w and Σ dout·w·x̂) in one combined warp/block reduction. Blocks loop over rows
// (grid = resident blocks) and accumulate dw / db for their fixed columns in registers; at the
// end each block writes one partial row [C], and a second small kernel sums the partial rows in
// a fixed order and adds them to dw / db (deterministic, no atomics).
#include <algorithm>
#include <atomic>
#include <initializer_list>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/fp8/codes.cuh"
#include "biofm/ops/norm/op.h"
#include "biofm/ops/options.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

constexpr int kMaxThreadsPerRow = 512;  // also the kernels' __launch_bounds__ (<= 128 registers)
constexpr int kBlockTarget = 256;       // threads per block to aim for

// Chunks per thread (MAXC) the kernels are compiled for: VEC = 8 offers a choice, VEC = 1
// (odd C, unaligned views) always caches 8.
constexpr int kFwdChunks[] = {1, 2, 4, 8};
constexpr int kBwdChunks[] = {1, 2, 4};
constexpr int kMaxChunks = 8;
// The automatic choice (VEC = 8), measured on H100 with bench/norm_bias_bench.cpp over C = 480
// to 5120 at 16k rows (docs/PERFORMANCE.md, session 14): backward 1 (C = 1280: 110 -> 75 us,
// 2.2 TB/s; the fewer registers, the more rows in flight), RMSNorm forward 2, LayerNorm
// forward 4 (its second, centred pass over the registers favours more chunks per thread).
constexpr int kAutoBwdChunks = 1;
constexpr int auto_fwd_chunks(bool rms) { return rms ? 2 : 4; }

// The chunks per thread for C features: `requested` (ops.norm_chunks, 0 = automatic) or the
// automatic choice, raised to the smallest compiled value that fits a row in 512 threads.
template <size_t K>
int pick_chunks(int64_t C, int vec, int requested, int automatic, const int (&compiled)[K]) {
  if (vec != 8) return kMaxChunks;
  const int64_t need = ceil_div(ceil_div(C, int64_t(vec)), int64_t(kMaxThreadsPerRow));
  const int want = std::max<int64_t>(requested > 0 ? requested : automatic, need);
  for (int c : compiled)
    if (c >= want) return c;
  return compiled[K - 1];  // too large for any: row_layout reports it
}

struct RowLayout {
  int tpr = 32;  // threads per row (multiple of 32)
  int rpb = 1;   // rows (groups) per block
  int threads() const { return tpr * rpb; }
};

RowLayout row_layout(int64_t C, int vec, int max_chunks, const char* op) {
  const int64_t chunks = C / vec;
  int64_t tpr = ceil_div(std::max<int64_t>(ceil_div(chunks, max_chunks), 1), 32) * 32;
  if (tpr > kMaxThreadsPerRow)
    fail(op, ": feature dimension ", C, " is too large for the CUDA kernel (at most ",
         int64_t(kMaxThreadsPerRow) * max_chunks * vec, ")");
  RowLayout l;
  l.tpr = int(tpr);
  l.rpb = std::max(1, kBlockTarget / l.tpr);
  return l;
}

// ---------------------------------------------------------------------------------------
// Forward.

// Reads row `xr` into the thread's registers v (its chunks k * tpr + t) and returns the row's
// statistics: m the mean (0 for RMSNorm), r the reciprocal standard deviation (or RMS). Every
// thread of the row group calls it (group sums); `valid` false reads nothing.
template <class T, int VEC, int MAXC, bool RMS>
__device__ __forceinline__ void load_row_stats(float (&v)[MAXC][VEC], float& m, float& r, const T* xr, bool valid,
                                               int nchunks, int tpr, int t, float* scratch, int lane, int warp,
                                               int nw, float inv_c, float eps) {
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < MAXC; ++k) {
    const int ch = k * tpr + t;
    if (valid && ch < nchunks) {
      load_vec<VEC>(v[k], xr + int64_t(ch) * VEC);
#pragma unroll
      for (int i = 0; i < VEC; ++i) s += RMS ? v[k][i] * v[k][i] : v[k][i];
    }
  }
  s = group_sum(s, scratch, lane, warp, nw);
  m = 0.0f;
  if constexpr (RMS) {
    r = 1.0f / sqrtf(s * inv_c + eps);
  } else {
    m = s * inv_c;
    float d2 = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int ch = k * tpr + t;
      if (valid && ch < nchunks) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const float d = v[k][i] - m;
          d2 += d * d;
        }
      }
    }
    d2 = group_sum(d2, scratch, lane, warp, nw);
    r = 1.0f / sqrtf(d2 * inv_c + eps);
  }
}

// The output values of chunk ch from its inputs v: (v - m) * r * w + b, or v * r * w (RMS).
template <class W, int VEC, bool RMS>
__device__ __forceinline__ void normalized_chunk(float (&y)[VEC], const float (&v)[VEC], float m, float r, const W* w,
                                                 const W* b, int ch) {
  float wv[VEC];
  load_vec<VEC>(wv, w + int64_t(ch) * VEC);
  if constexpr (RMS) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) y[i] = wv[i] * (v[i] * r);
  } else {
    float bv[VEC];
    if (b) {
      load_vec<VEC>(bv, b + int64_t(ch) * VEC);
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) bv[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < VEC; ++i) y[i] = (v[i] - m) * r * wv[i] + bv[i];
  }
}

// kCodes (norm_forward_fp8): the output exists only as the next GEMM's FP8 codes. Each value is
// rounded to T as the bf16 output would be stored, then encoded with the scale of
// *scale_amax_bits (fp8_quantize's arithmetic) and stored as one byte into q; scale_inv gets the
// scale's inverse, amax_bits (required then) max |value|. VEC = 8 then. The transposed codes are
// transpose_codes_kernel's: a row-wise kernel cannot write whole sectors of columns (a tile of
// rows in shared memory capped the occupancy and ran at half the bandwidth, docs/PERFORMANCE.md
// session 22).
template <class T, class W, int VEC, int MAXC, bool RMS, bool kCodes = false, Fp8Type kType = Fp8Type::E4M3>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    norm_forward_kernel(T* out, float* mean_out, float* rstd_out, const T* x, const W* w,
                        const W* b, int64_t N, int C, int tpr, float eps, unsigned* amax_bits,
                        uint8_t* q = nullptr, const unsigned* scale_amax_bits = nullptr, float fmax = 0.0f,
                        float* scale_inv = nullptr) {
  extern __shared__ float smem[];
  const int rpb = blockDim.x / tpr;
  const int g = threadIdx.x / tpr, t = threadIdx.x % tpr;
  const int lane = t & 31, warp = t >> 5, nw = tpr >> 5;
  float* scratch = smem + g * nw;
  const int nchunks = C / VEC;
  const float inv_c = C ? 1.0f / float(C) : 0.0f;
  float amax = 0.0f;  // of the outputs as stored (only with amax_bits)
  float scale = 1.0f;
  if constexpr (kCodes) {
    scale = fp8_codes::scale_for(__uint_as_float(*scale_amax_bits), fmax);
    if (blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = 1.0f / scale;
  }

  for (int64_t base = int64_t(blockIdx.x) * rpb; base < N; base += int64_t(gridDim.x) * rpb) {
    const int64_t row = base + g;
    const bool valid = row < N;
    float v[MAXC][VEC], m, r;
    load_row_stats<T, VEC, MAXC, RMS>(v, m, r, x + row * C, valid, nchunks, tpr, t, scratch, lane, warp, nw, inv_c,
                                      eps);
    if (!valid) continue;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int ch = k * tpr + t;
      if (ch < nchunks) {
        float y[VEC];
        normalized_chunk<W, VEC, RMS>(y, v[k], m, r, w, b, ch);
        if constexpr (kCodes) {
          Pack<uint8_t, VEC> codes;
#pragma unroll
          for (int i = 0; i < VEC; ++i) codes.v[i] = fp8_codes::encode<kType>(to_f32(from_f32<T>(y[i])) * scale);
          *reinterpret_cast<Pack<uint8_t, VEC>*>(q + row * C + int64_t(ch) * VEC) = codes;
        } else {
          store_vec<VEC>(out + row * C + int64_t(ch) * VEC, y);
        }
        if (amax_bits) {
#pragma unroll
          for (int i = 0; i < VEC; ++i) amax = fmaxf(amax, stored_abs<T>(y[i]));
        }
      }
    }
    if (t == 0) {
      if (mean_out) mean_out[row] = m;
      if (rstd_out) rstd_out[row] = r;
    }
  }
  if (amax_bits) amax_reduce_into(amax_bits, amax);  // every thread gets here: no early exit above
}

// q [N, C] -> q_t [C, Np] (bytes; C and Np multiples of 16, rows N..Np zero), through 64 x 64
// tiles in shared memory as fp8/cuda.cu's quantization writes its transposed codes: every thread
// reads 16 bytes of a row and writes 16 bytes of a column. Grid (Np / 64, C / 64, rounded up).
__global__ void __launch_bounds__(256) transpose_codes_kernel(uint8_t* q_t, const uint8_t* q, int64_t N, int64_t C,
                                                              int64_t Np) {
  using fp8_codes::kTile;
  __shared__ __align__(16) uint8_t tile[kTile][kTile + 16];
  const int64_t row0 = int64_t(blockIdx.x) * kTile, col0 = int64_t(blockIdx.y) * kTile;
  const int r = threadIdx.x >> 2, c = (threadIdx.x & 3) * 16;
  const int64_t gr = row0 + r, gc = col0 + c;
  Pack<uint8_t, 16> v;
  if (gc < C && gr < N) {
    v = *reinterpret_cast<const Pack<uint8_t, 16>*>(q + gr * C + gc);
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) v.v[i] = 0;
  }
  *reinterpret_cast<Pack<uint8_t, 16>*>(&tile[r][fp8_codes::tile_col(r, c)]) = v;
  __syncthreads();
  fp8_codes::store_tile_transposed(tile, q_t, C, Np, row0, col0);
}

// ---------------------------------------------------------------------------------------
// Backward.

// Sums the per-thread column accumulators of a block's rpb row groups (threads of equal t own
// the same columns) and writes them to prow[C]. Called by every thread of the block.
template <int VEC, int MAXC>
__device__ __forceinline__ void write_block_partial(float* prow, const float (&acc)[MAXC][VEC],
                                                    float* smem, int rpb, int tpr, int g, int t,
                                                    int nchunks) {
#pragma unroll
  for (int k = 0; k < MAXC; ++k) {
    const int ch = k * tpr + t;
    if (rpb == 1) {
      if (ch < nchunks) store_vec<VEC>(prow + int64_t(ch) * VEC, acc[k]);
      continue;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < VEC; ++i) smem[(g * tpr + t) * VEC + i] = acc[k][i];
    __syncthreads();
    if (g == 0 && ch < nchunks) {
      float sum[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) sum[i] = 0.0f;
      for (int gg = 0; gg < rpb; ++gg)
#pragma unroll
        for (int i = 0; i < VEC; ++i) sum[i] += smem[(gg * tpr + t) * VEC + i];
      store_vec<VEC>(prow + int64_t(ch) * VEC, sum);
    }
  }
}

// dx (may alias dout; may be null), partial rows part_w / part_b [gridDim.x, C] (may be null),
// dres: the residual gradient added to dx (may alias dx; may be null).
template <class T, class W, int VEC, int MAXC, bool RMS>
__global__ void __launch_bounds__(kMaxThreadsPerRow)
    norm_backward_kernel(T* dx, float* part_w, float* part_b, const T* dout, const T* x, const W* w,
                         const float* mean, const float* rstd, const T* dres, int64_t N, int C,
                         int tpr, unsigned* amax_bits) {
  extern __shared__ float smem[];
  const int rpb = blockDim.x / tpr;
  const int g = threadIdx.x / tpr, t = threadIdx.x % tpr;
  const int lane = t & 31, warp = t >> 5, nw = tpr >> 5;
  float2* scratch = reinterpret_cast<float2*>(smem) + g * nw;
  const int nchunks = C / VEC;
  const float inv_c = C ? 1.0f / float(C) : 0.0f;
  const bool want_w = part_w != nullptr, want_b = part_b != nullptr;
  float amax = 0.0f;  // of dx as stored (only with amax_bits)

  float wv[MAXC][VEC], aw[MAXC][VEC], ab[MAXC][VEC];
#pragma unroll
  for (int k = 0; k < MAXC; ++k) {
    const int ch = k * tpr + t;
#pragma unroll
    for (int i = 0; i < VEC; ++i) aw[k][i] = ab[k][i] = 0.0f;
    if (ch < nchunks)
      load_vec<VEC>(wv[k], w + int64_t(ch) * VEC);
    else
#pragma unroll
      for (int i = 0; i < VEC; ++i) wv[k][i] = 0.0f;
  }

  for (int64_t base = int64_t(blockIdx.x) * rpb; base < N; base += int64_t(gridDim.x) * rpb) {
    const int64_t row = base + g;
    const bool valid = row < N;
    float xv[MAXC][VEC], gv[MAXC][VEC];
    const float m = (!RMS && valid) ? mean[row] : 0.0f;
    const float r = valid ? rstd[row] : 0.0f;
    float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int ch = k * tpr + t;
      if (valid && ch < nchunks) {
        load_vec<VEC>(xv[k], x + row * C + int64_t(ch) * VEC);
        load_vec<VEC>(gv[k], dout + row * C + int64_t(ch) * VEC);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          if constexpr (RMS) {
            // dx = r·(g·w) - x·r³·mean(g·w·x);  dw += g·(x·r)
            s.x += gv[k][i] * wv[k][i] * xv[k][i];
            aw[k][i] += gv[k][i] * (xv[k][i] * r);
          } else {
            // x̂ = (x - m)·r;  dx = r·(g·w - mean(g·w) - x̂·mean(g·w·x̂));  dw += g·x̂;  db += g
            const float xh = (xv[k][i] - m) * r;
            const float dxh = gv[k][i] * wv[k][i];
            s.x += dxh;
            s.y += dxh * xh;
            aw[k][i] += gv[k][i] * xh;
            ab[k][i] += gv[k][i];
          }
        }
      }
    }
    if (dx == nullptr) continue;  // the same for the whole block
    // Every thread reaches this one reduction, rows past N included: its barriers (nw > 1)
    // must be the same instruction for the whole block (compute-sanitizer synccheck).
    s = group_sum2(s, scratch, lane, warp, nw);
    if (!valid) continue;
    const float a1 = s.x * inv_c, a2 = s.y * inv_c;
    T* dr = dx + row * C;
#pragma unroll
    for (int k = 0; k < MAXC; ++k) {
      const int ch = k * tpr + t;
      if (ch < nchunks) {
        float y[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          if constexpr (RMS)
            y[i] = r * (gv[k][i] * wv[k][i]) - xv[k][i] * (a1 * r * r * r);
          else
            y[i] = r * (gv[k][i] * wv[k][i] - a1 - ((xv[k][i] - m) * r) * a2);
        }
        if (dres != nullptr) {
          float rv[VEC];
          load_vec<VEC>(rv, dres + row * C + int64_t(ch) * VEC);
#pragma unroll
          for (int i = 0; i < VEC; ++i) y[i] += rv[i];
        }
        store_vec<VEC>(dr + int64_t(ch) * VEC, y);
        if (amax_bits)
#pragma unroll
          for (int i = 0; i < VEC; ++i) amax = fmaxf(amax, stored_abs<T>(y[i]));
      }
    }
  }
  if (amax_bits) amax_reduce_into(amax_bits, amax);  // every thread of the block gets here

  // This block's column sums: reduce the rpb groups through shared memory (one chunk column
  // at a time), then group 0 writes the block's partial row.
  if (want_w)
    write_block_partial<VEC, MAXC>(part_w + int64_t(blockIdx.x) * C, aw, smem, rpb, tpr, g, t,
                                   nchunks);
  if (!RMS && want_b)
    write_block_partial<VEC, MAXC>(part_b + int64_t(blockIdx.x) * C, ab, smem, rpb, tpr, g, t,
                                   nchunks);
}

// dst[c] += Σ_p part[p, c] over P partial rows; blockIdx.y picks (dw, part_w) or (db, part_b).
// A block is 32 columns x kPartialLanes row lanes: enough threads in flight for C = 2048 (only
// 64 blocks) to read the partial rows at bandwidth rather than at one load latency per row.
constexpr int kPartialLanes = 32;
__global__ void sum_partials_kernel(float* dw, const float* part_w, float* db, const float* part_b,
                                    int P, int C) {
  __shared__ float red[kPartialLanes][33];
  float* dst = blockIdx.y == 0 ? dw : db;
  const float* part = blockIdx.y == 0 ? part_w : part_b;
  if (dst == nullptr) return;
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < C)
    for (int p = threadIdx.y; p < P; p += kPartialLanes) s += part[int64_t(p) * C + c];
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.0f;
#pragma unroll
    for (int y = 0; y < kPartialLanes; ++y) t += red[y][threadIdx.x];
    dst[c] += t;
  }
}

// ---------------------------------------------------------------------------------------
// Host side.

struct NormArgs {
  int64_t N = 0, C = 0;
};

NormArgs check_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, bool rms, const char* op) {
  require_float(x, op, "x");
  require_float(w, op, "w");
  require_like(out, x, op, "out", "x");
  if (w.dim() != 1) fail(op, ": w must be [C], got ", w.describe());
  NormArgs a;
  a.C = w.size(0);
  a.N = rows_of(x, a.C, op, "x");
  if (!rms && b.defined()) {
    require_like(b, w, op, "b", "w");
  }
  if (mean.defined()) {
    require_dtype(mean, DType::F32, op, "mean");
    require_shape(mean, {a.N}, op, "mean");
  }
  if (rstd.defined()) {
    require_dtype(rstd, DType::F32, op, "rstd");
    require_shape(rstd, {a.N}, op, "rstd");
  }
  return a;
}

// Where norm_forward_kernel writes FP8 codes instead of out (launch_forward_fp8).
struct CodesOut {
  uint8_t* q = nullptr;
  float* scale_inv = nullptr;
  const unsigned* scale_amax_bits = nullptr;
  float fmax = 0.0f;
  Fp8Type type = Fp8Type::E4M3;
};

// codes given: out is not written (pass an undefined one); the caller checked what the codes
// need (16-byte aligned rows of a multiple of 16), and one block runs even for no rows, to write
// scale_inv; max |output| is folded into the history row `out_amax` (amax_record_slot), not
// set.
template <bool RMS>
void launch_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& w,
                    const Tensor& b, float eps, const char* op, const Tensor& out_amax = Tensor(),
                    const CodesOut* codes = nullptr) {
  const NormArgs a = check_forward(codes ? x : out, mean, rstd, x, w, b, RMS, op);
  unsigned* amax_bits = codes ? amax_record_slot(out_amax, op) : amax_accumulator(out_amax, op);
  if (a.N == 0 && !codes) return;
  const bool vec8 = a.C % 8 == 0 && aligned16(x) && aligned16(out) && aligned16(w) && aligned16(b);
  dispatch_float(x.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    dispatch_float(w.dtype(), op, [&](auto wt) {
      using Wt = typename decltype(wt)::type;
      auto go = [&](auto vec_c, auto chunks_c) {
        constexpr int VEC = decltype(vec_c)::value, MAXC = decltype(chunks_c)::value;
        const RowLayout l = row_layout(a.C, VEC, MAXC, op);
        const unsigned grid = grid_for(a.N, l.rpb, sm_waves(2048 / l.threads() * 2));
        const size_t shm = size_t(l.rpb) * (l.tpr / 32) * sizeof(float);
        const CodesOut c = codes ? *codes : CodesOut{};
        auto launch = [&](auto kernel) {
          kernel<<<grid, l.threads(), shm, cuda_ctx::stream()>>>(
              codes ? nullptr : static_cast<T*>(out.raw()), mean.defined() ? mean.f32() : nullptr,
              rstd.defined() ? rstd.f32() : nullptr, static_cast<const T*>(x.raw()),
              static_cast<const Wt*>(w.raw()),
              (!RMS && b.defined()) ? static_cast<const Wt*>(b.raw()) : nullptr, a.N, int(a.C), l.tpr,
              eps, amax_bits, c.q, c.scale_amax_bits, c.fmax, c.scale_inv);
          BIOFM_CUDA_LAUNCH_CHECK();
        };
        if (!codes) return launch(norm_forward_kernel<T, Wt, VEC, MAXC, RMS>);
        if constexpr (VEC == 8) {
          if (c.type == Fp8Type::E4M3) return launch(norm_forward_kernel<T, Wt, VEC, MAXC, RMS, true, Fp8Type::E4M3>);
          return launch(norm_forward_kernel<T, Wt, VEC, MAXC, RMS, true, Fp8Type::E5M2>);
        } else {
          fail(op, ": FP8 codes need 16-byte aligned rows of a multiple of 8 features");
        }
      };
      using I = std::integral_constant<int, 8>;
      if (!vec8) return go(std::integral_constant<int, 1>{}, I{});
      switch (pick_chunks(a.C, 8, op_options().norm_chunks, auto_fwd_chunks(RMS), kFwdChunks)) {
        case 1: return go(I{}, std::integral_constant<int, 1>{});
        case 2: return go(I{}, std::integral_constant<int, 2>{});
        case 4: return go(I{}, std::integral_constant<int, 4>{});
        default: return go(I{}, std::integral_constant<int, 8>{});
      }
    });
  });
}

std::atomic<int64_t> g_fp8_calls{0};

// The FP8-output forward (norm_forward_kernel with kCodes, then transpose_codes_kernel). x BF16
// or F32 with C % 16 == 0; q [N, C] and q_t [C, Np] U8; the scale from amax (required), max
// |output| folded into record's slot 0 (required).
template <bool RMS>
void launch_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& mean, Tensor& rstd, const Tensor& x,
                        const Tensor& w, const Tensor& b, float eps, Fp8Type type, const Tensor& amax,
                        const Tensor& record, const char* op) {
  const NormArgs a = check_forward(/*out (none here)=*/x, mean, rstd, x, w, b, RMS, op);
  if (!amax.defined() || !record.defined()) fail(op, ": amax (the delayed scale) and record are required");
  if (record.raw() == amax.raw()) fail(op, ": record must not be the delayed scale's amax (the kernel reads it)");
  require_dtype(amax, DType::F32, op, "amax");
  require_shape(amax, {1}, op, "amax");
  require_dtype(scale_inv, DType::F32, op, "scale_inv");
  require_shape(scale_inv, {1}, op, "scale_inv");
  require_dtype(q, DType::U8, op, "q");
  require_shape(q, {a.N, a.C}, op, "q");
  int64_t Np = 0;
  if (q_t.defined()) {
    require_dtype(q_t, DType::U8, op, "q_t");
    Np = q_t.dim() == 2 ? q_t.size(1) : -1;
    if (q_t.dim() != 2 || q_t.size(0) != a.C || Np < a.N || Np % 16 != 0)
      fail(op, ": q_t must be [", a.C, ", Np] with Np >= ", a.N, " a multiple of 16, got ", q_t.describe());
  }
  if (a.C % 16 != 0) fail(op, ": the feature dimension must be a multiple of 16 on the GPU, got ", a.C);
  if (!aligned16(x) || !aligned16(w) || !aligned16(b) || !aligned16(q) || !aligned16(q_t))
    fail(op, ": x, w, b, q and q_t must be 16-byte aligned on the GPU");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &w, &b, &q, &q_t, &scale_inv, &amax, &record,
                                                              &mean, &rstd})
    if (t->defined() && t->device() != Device::CUDA) fail(op, ": every tensor must be on the GPU, got ", t->describe());
  if (ceil_div(a.C, fp8_codes::kTile) > 65535) fail(op, ": ", a.C, " features is more than this kernel handles");
  ++g_fp8_calls;
  const CodesOut codes{static_cast<uint8_t*>(q.raw()), scale_inv.f32(), reinterpret_cast<const unsigned*>(amax.f32()),
                       fp8_max(type), type};
  Tensor no_out;
  launch_forward<RMS>(no_out, mean, rstd, x, w, b, eps, op, /*max |output| folded into:*/ record, &codes);
  cudaStream_t st = cuda_ctx::stream();
  if (q_t.defined() && Np > 0) {
    const dim3 grid(unsigned(ceil_div(Np, fp8_codes::kTile)), unsigned(ceil_div(a.C, fp8_codes::kTile)));
    transpose_codes_kernel<<<grid, 256, 0, st>>>(static_cast<uint8_t*>(q_t.raw()), static_cast<const uint8_t*>(q.raw()),
                                                 a.N, a.C, Np);
    BIOFM_CUDA_LAUNCH_CHECK();
  }
}

template <bool RMS>
void launch_backward(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x,
                     const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& dres,
                     const Tensor& dx_amax, const char* op) {
  require_float(x, op, "x");
  require_float(w, op, "w");
  require_like(dout, x, op, "dout", "x");
  if (w.dim() != 1) fail(op, ": w must be [C], got ", w.describe());
  const int64_t C = w.size(0);
  const int64_t N = rows_of(x, C, op, "x");
  if (!RMS) {
    require_dtype(mean, DType::F32, op, "mean");
    require_shape(mean, {N}, op, "mean");
  }
  require_dtype(rstd, DType::F32, op, "rstd");
  require_shape(rstd, {N}, op, "rstd");
  if (dx.defined()) require_like(dx, x, op, "dx", "x");
  if (dres.defined()) {
    if (!dx.defined()) fail(op, ": dres given without dx");
    require_like(dres, x, op, "dres", "x");
  }
  if (dw.defined()) {
    require_dtype(dw, DType::F32, op, "dw");
    require_shape(dw, {C}, op, "dw");
  }
  if (!RMS && db.defined()) {
    require_dtype(db, DType::F32, op, "db");
    require_shape(db, {C}, op, "db");
  }
  if (dx_amax.defined() && !dx.defined()) fail(op, ": dx_amax given without dx");
  unsigned* amax_bits = amax_accumulator(dx_amax, op);  // (zeroed: 0 for N == 0)
  const bool want_w = dw.defined(), want_b = !RMS && db.defined();
  if (N == 0 || (!dx.defined() && !want_w && !want_b)) return;
  const bool vec8 = C % 8 == 0 && aligned16(x) && aligned16(dout) && aligned16(dx) && aligned16(w) &&
                    aligned16(dres);

  dispatch_float(x.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    dispatch_float(w.dtype(), op, [&](auto wt) {
      using Wt = typename decltype(wt)::type;
      auto go = [&](auto vec_c, auto chunks_c) {
        constexpr int VEC = decltype(vec_c)::value, MAXC = decltype(chunks_c)::value;
        const RowLayout l = row_layout(C, VEC, MAXC, op);
        const size_t shm = std::max(size_t(l.rpb) * (l.tpr / 32) * sizeof(float2),
                                    l.rpb > 1 ? size_t(l.threads()) * VEC * sizeof(float) : 0);
        // One wave of resident blocks: as many loads in flight as the registers allow, and no
        // more partial rows than needed.
        auto kernel = norm_backward_kernel<T, Wt, VEC, MAXC, RMS>;
        int per_sm = 0;
        BIOFM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, l.threads(), shm));
        const unsigned grid = grid_for(N, l.rpb, sm_waves(std::max(per_sm, 1)));
        Tensor part_w, part_b;
        if (want_w) part_w = Tensor::empty({int64_t(grid), C}, DType::F32, Device::CUDA);
        if (want_b) part_b = Tensor::empty({int64_t(grid), C}, DType::F32, Device::CUDA);
        kernel<<<grid, l.threads(), shm, cuda_ctx::stream()>>>(
            dx.defined() ? static_cast<T*>(dx.raw()) : nullptr, want_w ? part_w.f32() : nullptr,
            want_b ? part_b.f32() : nullptr, static_cast<const T*>(dout.raw()),
            static_cast<const T*>(x.raw()), static_cast<const Wt*>(w.raw()),
            RMS ? nullptr : mean.f32(), rstd.f32(),
            dres.defined() ? static_cast<const T*>(dres.raw()) : nullptr, N, int(C), l.tpr, amax_bits);
        BIOFM_CUDA_LAUNCH_CHECK();
        if (want_w || want_b) {
          const dim3 rgrid(unsigned(ceil_div(C, 32)), 2);
          sum_partials_kernel<<<rgrid, dim3(32, kPartialLanes), 0, cuda_ctx::stream()>>>(
              want_w ? dw.f32() : nullptr, want_w ? part_w.f32() : nullptr,
              want_b ? db.f32() : nullptr, want_b ? part_b.f32() : nullptr, int(grid), int(C));
          BIOFM_CUDA_LAUNCH_CHECK();
        }
        // part_w / part_b go back to the caching allocator here; the stream orders their reuse.
      };
      using I = std::integral_constant<int, 8>;
      if (!vec8) return go(std::integral_constant<int, 1>{}, I{});
      switch (pick_chunks(C, 8, op_options().norm_chunks, kAutoBwdChunks, kBwdChunks)) {
        case 1: return go(I{}, std::integral_constant<int, 1>{});
        case 2: return go(I{}, std::integral_constant<int, 2>{});
        default: return go(I{}, std::integral_constant<int, 4>{});
      }
    });
  });
}

}  // namespace

void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b, float eps, const Tensor& out_amax) {
  launch_forward<false>(out, mean, rstd, x, w, b, eps, "layernorm_forward", out_amax);
}

void layernorm_backward(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& dres,
                        const Tensor& dx_amax) {
  launch_backward<false>(dx, dw, db, dout, x, w, mean, rstd, dres, dx_amax, "layernorm_backward");
}

void rmsnorm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& w, float eps, const Tensor& out_amax) {
  Tensor none;
  launch_forward<true>(out, none, rstd, x, w, none, eps, "rmsnorm_forward", out_amax);
}

void rmsnorm_backward(Tensor& dx, Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, const Tensor& dres, const Tensor& dx_amax) {
  Tensor none;
  launch_backward<true>(dx, dw, none, dout, x, w, none, rstd, dres, dx_amax, "rmsnorm_backward");
}

int64_t norm_forward_fp8_calls() { return g_fp8_calls.load(); }

void layernorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& mean, Tensor& rstd, const Tensor& x,
                           const Tensor& w, const Tensor& b, float eps, Fp8Type t, const Tensor& amax,
                           const Tensor& record) {
  launch_forward_fp8<false>(q, q_t, scale_inv, mean, rstd, x, w, b, eps, t, amax, record, "layernorm_forward_fp8");
}

void rmsnorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& rstd, const Tensor& x, const Tensor& w,
                         float eps, Fp8Type t, const Tensor& amax, const Tensor& record) {
  Tensor none;
  launch_forward_fp8<true>(q, q_t, scale_inv, none, rstd, x, w, none, eps, t, amax, record, "rmsnorm_forward_fp8");
}

}  // namespace biofm::ops::cuda
