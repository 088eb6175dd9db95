// Scaled dot-product attention on the GPU: the dispatcher between cuDNN's fused SDPA
// (cudnn_sdpa_cuda.cpp) and the plain CUDA kernels below, which take every shape and dtype
// cuDNN does not (F32, head dims that are not a multiple of 8, failed graph builds, GPUs or
// cuDNN versions without ragged SDPA).
//
// Fallback kernels (fp32 arithmetic on F32 or BF16 tensors, head dim D <= 128 padded to DP in
// {16, 32, 64, 128}). Every kernel uses 256 threads as a 16×16 grid (tx, ty) and register
// tiles: a thread owns RM = BM/16 rows (ty·RM + r) of an [BM × BN] score tile and columns
// tx + 16·c of it, and the same rows × columns tx + 16·c of a [BM × DP] accumulator, so the
// softmax row statistics it needs come from a 16-lane shuffle reduction. Tiles of Q/K/V/dO
// live in shared memory as fp32 with a row stride of DP + 1 (conflict-free column access).
//   forward     one block per (query tile, head, sequence): K/V tiles streamed through shared
//               memory, online softmax in base 2, writes out and lse (natural log).
//   backward    FlashAttention-2 style, without atomics (deterministic):
//               (1) Dvec[i,h] = Σ dO·O per row;
//               (2) one block per (key tile, kv head, sequence) loops over the query heads of
//                   its GQA group and their query tiles, recomputes P = exp(scale·qk − lse),
//                   accumulates dV += Pᵀ dO and dK += dSᵀ Q in registers, dS = P∘(dP − Dvec);
//               (3) one block per (query tile, head, sequence) loops over key tiles and
//                   accumulates dQ += dS K.
// Rows outside every sequence (BSHD padding, rows after cu_seqlens[B]) are zeroed by a small
// kernel after either path, for out, lse, dq, dk and dv.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "biofm/core/cuda_context.h"
#include "biofm/ops/attention/cudnn_sdpa.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/cuda_util.cuh"

namespace biofm::ops::cuda {
namespace attention_detail {
namespace {
using namespace cuda_detail;

constexpr int kThreads = 256;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Rows [row0, row0 + rows) of one head of a sequence into shared memory s[rows][DP + 1] as
// fp32; rows at or after `len` and columns at or after D are zero. `g` points at the head's
// first element of the sequence's first row; `ld` is the global row stride (H·D).
template <typename T, int DP>
__device__ __forceinline__ void load_tile(float* s, const T* __restrict__ g, int64_t ld, int row0,
                                          int rows, int len, int D) {
  constexpr int LD = DP + 1;
  for (int idx = threadIdx.x; idx < rows * DP; idx += kThreads) {
    const int r = idx / DP, c = idx % DP;
    const int i = row0 + r;
    float x = 0.0f;
    if (i < len && c < D) x = to_f32(g[int64_t(i) * ld + c]);
    s[r * LD + c] = x;
  }
}

// acc[r][c] += Σ_k A[ty·RM + r][k] · B[tx + 16c][k]   (A, B row-major with stride lda/ldb)
template <int RM, int RN, int K>
__device__ __forceinline__ void mm_nt(float (&acc)[RM][RN], const float* A, int lda, const float* B,
                                      int ldb, int tx, int ty) {
  const float* a = A + ty * RM * lda;
  const float* b = B + tx * ldb;
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    float av[RM], bv[RN];
#pragma unroll
    for (int r = 0; r < RM; ++r) av[r] = a[r * lda + k];
#pragma unroll
    for (int c = 0; c < RN; ++c) bv[c] = b[c * 16 * ldb + k];
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int c = 0; c < RN; ++c) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
  }
}

// acc[r][c] += Σ_k P[ty·RM + r][k] · V[k][tx + 16c]
template <int RM, int CN, int K>
__device__ __forceinline__ void mm_nn(float (&acc)[RM][CN], const float* P, int ldp, const float* V,
                                      int ldv, int tx, int ty) {
  const float* p = P + ty * RM * ldp;
  const float* v = V + tx;
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    float pv[RM], vv[CN];
#pragma unroll
    for (int r = 0; r < RM; ++r) pv[r] = p[r * ldp + k];
#pragma unroll
    for (int c = 0; c < CN; ++c) vv[c] = v[k * ldv + c * 16];
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int c = 0; c < CN; ++c) acc[r][c] = fmaf(pv[r], vv[c], acc[r][c]);
  }
}

// Reductions over the 16 lanes sharing a ty (one half-warp).
__device__ __forceinline__ float half_warp_max(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o, 16));
  return x;
}
__device__ __forceinline__ float half_warp_sum(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o, 16);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------------

template <int DP, int BM, int BN>
struct FwdCfg {
  static constexpr int LD = DP + 1, LDP = BN + 1;
  static constexpr size_t smem = sizeof(float) * size_t(BM * LD + 2 * BN * LD + BM * LDP);
};

template <typename T, int DP, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    attn_fwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                    T* __restrict__ out, float* __restrict__ lse, const int32_t* __restrict__ cu,
                    const int32_t* __restrict__ lens, int Hq, int Hkv, int D, float scale_log2,
                    bool causal) {
  using Cfg = FwdCfg<DP, BM, BN>;
  constexpr int LD = Cfg::LD, LDP = Cfg::LDP, RM = BM / 16, RN = BN / 16, CN = DP / 16;
  const int s = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * BM;
  const int L = lens[s];
  if (q0 >= L) return;
  const int64_t start = cu[s];
  const int kvh = h / (Hq / Hkv);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  extern __shared__ float smem[];
  float* sQ = smem;
  float* sK = sQ + BM * LD;
  float* sV = sK + BN * LD;
  float* sP = sV + BN * LD;
  const int64_t ldq = int64_t(Hq) * D, ldk = int64_t(Hkv) * D;
  const T* kbase = k + start * ldk + int64_t(kvh) * D;
  const T* vbase = v + start * ldk + int64_t(kvh) * D;
  load_tile<T, DP>(sQ, q + start * ldq + int64_t(h) * D, ldq, q0, BM, L, D);

  float o[RM][CN];
  float m[RM], l[RM];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < CN; ++c) o[r][c] = 0.0f;
  }
  const int kend = causal ? min(L, q0 + BM) : L;
  for (int k0 = 0; k0 < kend; k0 += BN) {
    __syncthreads();  // the previous tile's sK/sV/sP are no longer read
    load_tile<T, DP>(sK, kbase, ldk, k0, BN, L, D);
    load_tile<T, DP>(sV, vbase, ldk, k0, BN, L, D);
    __syncthreads();
    float sc[RM][RN];
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int c = 0; c < RN; ++c) sc[r][c] = 0.0f;
    mm_nt<RM, RN, DP>(sc, sQ, LD, sK, LD, tx, ty);
#pragma unroll
    for (int r = 0; r < RM; ++r) {
      const int i = q0 + ty * RM + r;
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < RN; ++c) {
        const int j = k0 + tx + 16 * c;
        const bool ok = j < L && (!causal || j <= i);
        sc[r][c] = ok ? sc[r][c] * scale_log2 : -INFINITY;
        mx = fmaxf(mx, sc[r][c]);
      }
      mx = half_warp_max(mx);
      const float m_new = fmaxf(m[r], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m[r] - m_use);  // 0 when m[r] = -inf
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < RN; ++c) {
        const float p = exp2f(sc[r][c] - m_use);
        sum += p;
        sP[(ty * RM + r) * LDP + tx + 16 * c] = p;
      }
      sum = half_warp_sum(sum);
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < CN; ++c) o[r][c] *= alpha;
    }
    __syncthreads();
    mm_nn<RM, CN, BN>(o, sP, LDP, sV, LD, tx, ty);
  }

#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int i = q0 + ty * RM + r;
    if (i >= L) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T* orow = out + (start + i) * ldq + int64_t(h) * D;
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      const int col = tx + 16 * c;
      if (col < D) orow[col] = from_f32<T>(o[r][c] * inv);
    }
    if (lse && tx == 0) lse[(start + i) * Hq + h] = (m[r] + log2f(l[r])) * kLn2;
  }
}

// ---------------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------------

// Dvec[i, h] = Σ_d dO[i, h, d] · O[i, h, d]: one warp per (row, head).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    attn_dvec_kernel(const T* __restrict__ dout, const T* __restrict__ out, float* __restrict__ dvec,
                     int64_t rows, int D) {
  const int64_t w = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= rows) return;
  const T* a = dout + w * D;
  const T* b = out + w * D;
  float acc = 0.0f;
  for (int c = lane; c < D; c += 32) acc = fmaf(to_f32(a[c]), to_f32(b[c]), acc);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) dvec[w] = acc;
}

template <int DP, int BM, int BN>
struct DkvCfg {  // BM keys per block, BN queries per inner tile
  static constexpr int LD = DP + 1, LDP = BN + 1;
  static constexpr size_t smem =
      sizeof(float) * size_t(2 * BM * LD + 2 * BN * LD + 2 * BM * LDP + 2 * BN);
};

template <typename T, int DP, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    attn_bwd_dkdv_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                         const T* __restrict__ dout, const float* __restrict__ lse,
                         const float* __restrict__ dvec, T* __restrict__ dk, T* __restrict__ dv,
                         const int32_t* __restrict__ cu, const int32_t* __restrict__ lens, int Hq,
                         int Hkv, int D, float scale, bool causal) {
  using Cfg = DkvCfg<DP, BM, BN>;
  constexpr int LD = Cfg::LD, LDP = Cfg::LDP, RM = BM / 16, RN = BN / 16, CN = DP / 16;
  const int s = blockIdx.z, g = blockIdx.y, k0 = blockIdx.x * BM;
  const int L = lens[s];
  if (k0 >= L) return;
  const int64_t start = cu[s];
  const int group = Hq / Hkv;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  extern __shared__ float smem[];
  float* sK = smem;
  float* sV = sK + BM * LD;
  float* sQ = sV + BM * LD;
  float* sG = sQ + BN * LD;  // dO
  float* sP = sG + BN * LD;
  float* sS = sP + BM * LDP;  // dS
  float* sL = sS + BM * LDP;  // lse·log2(e) of the query tile
  float* sD = sL + BN;        // Dvec of the query tile
  const int64_t ldq = int64_t(Hq) * D, ldk = int64_t(Hkv) * D;
  load_tile<T, DP>(sK, k + start * ldk + int64_t(g) * D, ldk, k0, BM, L, D);
  load_tile<T, DP>(sV, v + start * ldk + int64_t(g) * D, ldk, k0, BM, L, D);
  const float scale_log2 = scale * kLog2e;

  float adk[RM][CN], adv[RM][CN];
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int c = 0; c < CN; ++c) adk[r][c] = adv[r][c] = 0.0f;

  const int qbegin = causal ? (k0 / BN) * BN : 0;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    const T* qbase = q + start * ldq + int64_t(h) * D;
    const T* gbase = dout + start * ldq + int64_t(h) * D;
    for (int q0 = qbegin; q0 < L; q0 += BN) {
      __syncthreads();
      load_tile<T, DP>(sQ, qbase, ldq, q0, BN, L, D);
      load_tile<T, DP>(sG, gbase, ldq, q0, BN, L, D);
      for (int t = threadIdx.x; t < BN; t += kThreads) {
        const int i = q0 + t;
        const bool ok = i < L;
        sL[t] = ok ? lse[(start + i) * Hq + h] * kLog2e : 0.0f;
        sD[t] = ok ? dvec[(start + i) * Hq + h] : 0.0f;
      }
      __syncthreads();
      float sc[RM][RN], dp[RM][RN];
#pragma unroll
      for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int c = 0; c < RN; ++c) sc[r][c] = dp[r][c] = 0.0f;
      mm_nt<RM, RN, DP>(sc, sK, LD, sQ, LD, tx, ty);  // S[j][i]
      mm_nt<RM, RN, DP>(dp, sV, LD, sG, LD, tx, ty);  // dP[j][i]
#pragma unroll
      for (int r = 0; r < RM; ++r) {
        const int j = k0 + ty * RM + r;
#pragma unroll
        for (int c = 0; c < RN; ++c) {
          const int t = tx + 16 * c;
          const int i = q0 + t;
          const bool ok = i < L && j < L && (!causal || j <= i);
          const float p = ok ? exp2f(sc[r][c] * scale_log2 - sL[t]) : 0.0f;
          const float ds = ok ? p * (dp[r][c] - sD[t]) : 0.0f;
          sP[(ty * RM + r) * LDP + t] = p;
          sS[(ty * RM + r) * LDP + t] = ds;
        }
      }
      __syncthreads();
      mm_nn<RM, CN, BN>(adv, sP, LDP, sG, LD, tx, ty);  // dV[j] += Σ_i P[j][i] dO[i]
      mm_nn<RM, CN, BN>(adk, sS, LDP, sQ, LD, tx, ty);  // dK[j] += Σ_i dS[j][i] Q[i]
    }
  }

#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int j = k0 + ty * RM + r;
    if (j >= L) continue;
    T* krow = dk + (start + j) * ldk + int64_t(g) * D;
    T* vrow = dv + (start + j) * ldk + int64_t(g) * D;
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      const int col = tx + 16 * c;
      if (col < D) {
        krow[col] = from_f32<T>(adk[r][c] * scale);
        vrow[col] = from_f32<T>(adv[r][c]);
      }
    }
  }
}

template <int DP, int BM, int BN>
struct DqCfg {  // BM queries per block, BN keys per inner tile
  static constexpr int LD = DP + 1, LDP = BN + 1;
  static constexpr size_t smem = sizeof(float) * size_t(2 * BM * LD + 2 * BN * LD + BM * LDP);
};

template <typename T, int DP, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    attn_bwd_dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                       const T* __restrict__ dout, const float* __restrict__ lse,
                       const float* __restrict__ dvec, T* __restrict__ dq,
                       const int32_t* __restrict__ cu, const int32_t* __restrict__ lens, int Hq,
                       int Hkv, int D, float scale, bool causal) {
  using Cfg = DqCfg<DP, BM, BN>;
  constexpr int LD = Cfg::LD, LDP = Cfg::LDP, RM = BM / 16, RN = BN / 16, CN = DP / 16;
  const int s = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * BM;
  const int L = lens[s];
  if (q0 >= L) return;
  const int64_t start = cu[s];
  const int kvh = h / (Hq / Hkv);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  extern __shared__ float smem[];
  float* sQ = smem;
  float* sG = sQ + BM * LD;
  float* sK = sG + BM * LD;
  float* sV = sK + BN * LD;
  float* sS = sV + BN * LD;
  const int64_t ldq = int64_t(Hq) * D, ldk = int64_t(Hkv) * D;
  load_tile<T, DP>(sQ, q + start * ldq + int64_t(h) * D, ldq, q0, BM, L, D);
  load_tile<T, DP>(sG, dout + start * ldq + int64_t(h) * D, ldq, q0, BM, L, D);
  const T* kbase = k + start * ldk + int64_t(kvh) * D;
  const T* vbase = v + start * ldk + int64_t(kvh) * D;
  const float scale_log2 = scale * kLog2e;
  float rl[RM], rd[RM];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int i = q0 + ty * RM + r;
    rl[r] = i < L ? lse[(start + i) * Hq + h] * kLog2e : 0.0f;
    rd[r] = i < L ? dvec[(start + i) * Hq + h] : 0.0f;
  }
  float adq[RM][CN];
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int c = 0; c < CN; ++c) adq[r][c] = 0.0f;

  const int kend = causal ? min(L, q0 + BM) : L;
  for (int k0 = 0; k0 < kend; k0 += BN) {
    __syncthreads();
    load_tile<T, DP>(sK, kbase, ldk, k0, BN, L, D);
    load_tile<T, DP>(sV, vbase, ldk, k0, BN, L, D);
    __syncthreads();
    float sc[RM][RN], dp[RM][RN];
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int c = 0; c < RN; ++c) sc[r][c] = dp[r][c] = 0.0f;
    mm_nt<RM, RN, DP>(sc, sQ, LD, sK, LD, tx, ty);  // S[i][j]
    mm_nt<RM, RN, DP>(dp, sG, LD, sV, LD, tx, ty);  // dP[i][j]
#pragma unroll
    for (int r = 0; r < RM; ++r) {
      const int i = q0 + ty * RM + r;
#pragma unroll
      for (int c = 0; c < RN; ++c) {
        const int j = k0 + tx + 16 * c;
        const bool ok = i < L && j < L && (!causal || j <= i);
        const float p = ok ? exp2f(sc[r][c] * scale_log2 - rl[r]) : 0.0f;
        sS[(ty * RM + r) * LDP + tx + 16 * c] = ok ? p * (dp[r][c] - rd[r]) : 0.0f;
      }
    }
    __syncthreads();
    mm_nn<RM, CN, BN>(adq, sS, LDP, sK, LD, tx, ty);  // dQ[i] += Σ_j dS[i][j] K[j]
  }

#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int i = q0 + ty * RM + r;
    if (i >= L) continue;
    T* row = dq + (start + i) * ldq + int64_t(h) * D;
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      const int col = tx + 16 * c;
      if (col < D) row[col] = from_f32<T>(adq[r][c] * scale);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers: padding rows, cuDNN offsets
// ---------------------------------------------------------------------------------------------

struct ZeroSlot {
  char* ptr = nullptr;
  int64_t row_bytes = 0;  // bytes of one token row (H·D·elem or H·4 for lse)
};
struct ZeroSlots {
  ZeroSlot s[4];
};

// Block b < B zeroes rows [cu[b] + len[b], cu[b+1]) of every slot; block B zeroes rows
// [cu[B], N). blockIdx.y selects the slot.
__global__ void __launch_bounds__(kThreads)
    zero_padding_rows_kernel(ZeroSlots slots, const int32_t* __restrict__ cu,
                             const int32_t* __restrict__ lens, int64_t B, int64_t N) {
  const ZeroSlot z = slots.s[blockIdx.y];
  if (!z.ptr) return;
  const int64_t b = blockIdx.x;
  const int64_t a = b < B ? int64_t(cu[b]) + lens[b] : int64_t(cu[B]);
  const int64_t e = b < B ? int64_t(cu[b + 1]) : N;
  if (e <= a) return;
  char* p = z.ptr + a * z.row_bytes;
  const int64_t bytes = (e - a) * z.row_bytes;
  if (((reinterpret_cast<uintptr_t>(p) | uintptr_t(bytes)) & 15) == 0) {
    uint4* w = reinterpret_cast<uint4*>(p);
    for (int64_t t = threadIdx.x; t < bytes / 16; t += kThreads) w[t] = make_uint4(0, 0, 0, 0);
  } else if (((reinterpret_cast<uintptr_t>(p) | uintptr_t(bytes)) & 3) == 0) {
    uint32_t* w = reinterpret_cast<uint32_t*>(p);
    for (int64_t t = threadIdx.x; t < bytes / 4; t += kThreads) w[t] = 0;
  } else {
    uint16_t* w = reinterpret_cast<uint16_t*>(p);
    for (int64_t t = threadIdx.x; t < bytes / 2; t += kThreads) w[t] = 0;
  }
}

__global__ void sdpa_offsets_kernel(const int32_t* __restrict__ cu, const int32_t* __restrict__ lens,
                                    int64_t B, int64_t Bb, int64_t qo_mult, int64_t kv_mult,
                                    int64_t st_mult, int32_t* seq_len, int64_t* off_qo,
                                    int64_t* off_kv, int64_t* off_st) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b <= Bb;
       b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = cu[b < B ? b : B];
    off_qo[b] = row * qo_mult;
    off_kv[b] = row * kv_mult;
    off_st[b] = row * st_mult;
    if (b < Bb) seq_len[b] = b < B ? lens[b] : 0;
  }
}

// lse[B·S, Hq] (our row-major statistics) → bhs[B, Hq, S] (what cuDNN's dense backward reads).
// One thread per element, consecutive threads along s for coalesced writes.
__global__ void lse_to_bhs_kernel(const float* __restrict__ lse, int64_t B, int64_t S, int64_t Hq,
                                  float* __restrict__ bhs) {
  const int64_t n = B * Hq * S;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i % S, h = (i / S) % Hq, b = i / (S * Hq);
    bhs[i] = lse[(b * S + s) * Hq + h];
  }
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------

// Prints `line` once per process (ops.attention_verbose only).
void verbose_once(const std::string& line) {
  if (!op_options().attention_verbose) return;
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(line).second) std::fprintf(stderr, "biofm attention: %s\n", line.c_str());
}

void warn_once(const std::string& line) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(line).second) std::fprintf(stderr, "biofm attention: %s\n", line.c_str());
}

// Opt a kernel in to more than 48 KiB of dynamic shared memory (once per kernel).
void set_smem(const void* kernel, size_t bytes) {
  static std::mutex mu;
  static std::set<const void*> done;
  std::lock_guard<std::mutex> lock(mu);
  if (done.count(kernel)) return;
  int dev = 0, max_optin = 0;
  BIOFM_CUDA_CHECK(cudaGetDevice(&dev));
  BIOFM_CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (bytes > size_t(max_optin))
    fail("attention (CUDA fallback): a kernel needs ", bytes, " bytes of shared memory, the GPU allows ",
         max_optin);
  BIOFM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  done.insert(kernel);
}

struct Problem {
  int64_t N = 0, B = 0, Hq = 0, Hkv = 0, D = 0, max_seqlen = 0;
  bool uniform = false;  // AttentionShape.uniform: no padding rows, every sequence max_seqlen long
  DType dtype = DType::F32;
};

template <typename T>
const T* cptr(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}
template <typename T>
T* mptr(const Tensor& t) {
  return static_cast<T*>(t.raw());
}

void zero_padding(const Problem& p, const Tensor& cu, const Tensor& lens,
                  std::initializer_list<std::pair<const Tensor*, int64_t>> tensors) {
  ZeroSlots slots{};
  int n = 0;
  for (auto [t, row_elems] : tensors) {
    if (!t || !t->defined()) continue;
    slots.s[n].ptr = static_cast<char*>(t->raw());
    slots.s[n].row_bytes = row_elems * int64_t(dtype_size(t->dtype()));
    ++n;
  }
  if (n == 0 || p.N == 0 || p.uniform) return;  // a uniform batch has no padding rows
  dim3 grid(unsigned(p.B + 1), unsigned(n));
  zero_padding_rows_kernel<<<grid, kThreads, 0, cuda_ctx::stream()>>>(slots, cu.i32(), lens.i32(), p.B, p.N);
  BIOFM_CUDA_LAUNCH_CHECK();
}

int padded_head_dim(int64_t D) {
  if (D <= 16) return 16;
  if (D <= 32) return 32;
  if (D <= 64) return 64;
  return 128;
}

// ---- fallback launchers ----

template <typename T, int DP>
void fallback_forward_dp(const Problem& p, const AttentionShape& a, const Tensor& q, const Tensor& k,
                         const Tensor& v, Tensor& out, float* lse, const Tensor& cu,
                         const Tensor& lens) {
  constexpr int BM = 64, BN = DP >= 128 ? 32 : 64;
  using Cfg = FwdCfg<DP, BM, BN>;
  auto kernel = attn_fwd_kernel<T, DP, BM, BN>;
  set_smem(reinterpret_cast<const void*>(kernel), Cfg::smem);
  dim3 grid(unsigned((p.max_seqlen + BM - 1) / BM), unsigned(p.Hq), unsigned(p.B));
  kernel<<<grid, kThreads, Cfg::smem, cuda_ctx::stream()>>>(
      cptr<T>(q), cptr<T>(k), cptr<T>(v), mptr<T>(out), lse, cu.i32(), lens.i32(), int(p.Hq),
      int(p.Hkv), int(p.D), a.scale * kLog2e, a.causal);
  BIOFM_CUDA_LAUNCH_CHECK();
}

template <typename T>
void fallback_forward(const Problem& p, const AttentionShape& a, const Tensor& q, const Tensor& k,
                      const Tensor& v, Tensor& out, float* lse, const Tensor& cu, const Tensor& lens) {
  switch (padded_head_dim(p.D)) {
    case 16: return fallback_forward_dp<T, 16>(p, a, q, k, v, out, lse, cu, lens);
    case 32: return fallback_forward_dp<T, 32>(p, a, q, k, v, out, lse, cu, lens);
    case 64: return fallback_forward_dp<T, 64>(p, a, q, k, v, out, lse, cu, lens);
    default: return fallback_forward_dp<T, 128>(p, a, q, k, v, out, lse, cu, lens);
  }
}

template <typename T, int DP>
void fallback_backward_dp(const Problem& p, const AttentionShape& a, const Tensor& dout,
                          const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                          const float* dvec, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& cu,
                          const Tensor& lens) {
  const unsigned sblocks64 = unsigned((p.max_seqlen + 63) / 64);
  {
    constexpr int BM = DP >= 128 ? 32 : 64, BN = DP >= 128 ? 32 : 64;
    using Cfg = DkvCfg<DP, BM, BN>;
    auto kernel = attn_bwd_dkdv_kernel<T, DP, BM, BN>;
    set_smem(reinterpret_cast<const void*>(kernel), Cfg::smem);
    dim3 grid(unsigned((p.max_seqlen + BM - 1) / BM), unsigned(p.Hkv), unsigned(p.B));
    kernel<<<grid, kThreads, Cfg::smem, cuda_ctx::stream()>>>(
        cptr<T>(q), cptr<T>(k), cptr<T>(v), cptr<T>(dout), lse.f32(), dvec, mptr<T>(dk),
        mptr<T>(dv), cu.i32(), lens.i32(), int(p.Hq), int(p.Hkv), int(p.D), a.scale, a.causal);
    BIOFM_CUDA_LAUNCH_CHECK();
  }
  {
    constexpr int BM = 64, BN = DP >= 128 ? 32 : 64;
    using Cfg = DqCfg<DP, BM, BN>;
    auto kernel = attn_bwd_dq_kernel<T, DP, BM, BN>;
    set_smem(reinterpret_cast<const void*>(kernel), Cfg::smem);
    dim3 grid(sblocks64, unsigned(p.Hq), unsigned(p.B));
    kernel<<<grid, kThreads, Cfg::smem, cuda_ctx::stream()>>>(
        cptr<T>(q), cptr<T>(k), cptr<T>(v), cptr<T>(dout), lse.f32(), dvec, mptr<T>(dq),
        cu.i32(), lens.i32(), int(p.Hq), int(p.Hkv), int(p.D), a.scale, a.causal);
    BIOFM_CUDA_LAUNCH_CHECK();
  }
}

template <typename T>
void fallback_backward(const Problem& p, const AttentionShape& a, const Tensor& dout,
                       const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& cu,
                       const Tensor& lens) {
  Tensor dvec = Tensor::empty({p.N, p.Hq}, DType::F32, Device::CUDA);
  const int64_t rows = p.N * p.Hq;
  const unsigned blocks = unsigned(ceil_div(rows * 32, kThreads));
  attn_dvec_kernel<T><<<blocks, kThreads, 0, cuda_ctx::stream()>>>(cptr<T>(dout), cptr<T>(out),
                                                                    dvec.f32(), rows, int(p.D));
  BIOFM_CUDA_LAUNCH_CHECK();
  switch (padded_head_dim(p.D)) {
    case 16: return fallback_backward_dp<T, 16>(p, a, dout, q, k, v, lse, dvec.f32(), dq, dk, dv, cu, lens);
    case 32: return fallback_backward_dp<T, 32>(p, a, dout, q, k, v, lse, dvec.f32(), dq, dk, dv, cu, lens);
    case 64: return fallback_backward_dp<T, 64>(p, a, dout, q, k, v, lse, dvec.f32(), dq, dk, dv, cu, lens);
    default: return fallback_backward_dp<T, 128>(p, a, dout, q, k, v, lse, dvec.f32(), dq, dk, dv, cu, lens);
  }
}

// ---- argument checks ----

void require(const Tensor& t, DType dt, const Shape& shape, const char* op, const char* name) {
  require_dtype(t, dt, op, name);
  require_shape(t, shape, op, name);
}

// Host copy of the (device) layout: only with ops.attention_check, or when max_seqlen was
// not given. Synchronises the stream.
int64_t inspect_layout(const char* op, const Tensor& cu, const Tensor& lens, int64_t N,
                       int64_t max_seqlen_hint, bool full_check, bool uniform) {
  const int64_t B = lens.numel();
  std::vector<int32_t> hc(static_cast<size_t>(B + 1)), hl(static_cast<size_t>(B));
  cudaStream_t st = cuda_ctx::stream();
  BIOFM_CUDA_CHECK(cudaMemcpyAsync(hc.data(), cu.raw(), hc.size() * 4, cudaMemcpyDeviceToHost, st));
  if (B) BIOFM_CUDA_CHECK(cudaMemcpyAsync(hl.data(), lens.raw(), hl.size() * 4, cudaMemcpyDeviceToHost, st));
  BIOFM_CUDA_CHECK(cudaStreamSynchronize(st));
  int64_t mx = 0;
  for (int64_t s = 0; s < B; ++s) mx = std::max<int64_t>(mx, hl[size_t(s)]);
  if (full_check) {
    if (hc[0] != 0) fail(op, ": cu_seqlens[0] must be 0, got ", hc[0]);
    for (int64_t s = 0; s < B; ++s) {
      if (hc[size_t(s + 1)] < hc[size_t(s)]) fail(op, ": cu_seqlens decreases at entry ", s + 1);
      if (hl[size_t(s)] < 0 || hl[size_t(s)] > hc[size_t(s + 1)] - hc[size_t(s)])
        fail(op, ": seq_lens[", s, "] = ", hl[size_t(s)], " does not fit its slot of ",
             hc[size_t(s + 1)] - hc[size_t(s)], " rows");
    }
    if (hc[size_t(B)] > N) fail(op, ": cu_seqlens ends at ", hc[size_t(B)], " but the batch has ", N, " rows");
    if (max_seqlen_hint > 0 && mx > max_seqlen_hint)
      fail(op, ": AttentionShape.max_seqlen = ", max_seqlen_hint, " but a sequence has ", mx, " tokens");
    if (uniform)
      for (int64_t s = 0; s < B; ++s)
        if (hl[size_t(s)] != max_seqlen_hint || hc[size_t(s)] != s * max_seqlen_hint)
          fail(op, ": AttentionShape.uniform promised sequences of ", max_seqlen_hint,
               " tokens back to back, but sequence ", s, " has ", hl[size_t(s)], " tokens at row ", hc[size_t(s)]);
  }
  return mx;
}

Problem problem_for(const char* op, DType dtype, int64_t N, int64_t Hq, int64_t Hkv, int64_t D, const Tensor& cu,
                    const Tensor& lens, const AttentionShape& a);

Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& cu, const Tensor& lens, const AttentionShape& a) {
  require_cuda(q, op, "q");
  if (q.dtype() != DType::F32 && q.dtype() != DType::BF16)
    fail(op, ": q must be F32 or BF16, got ", q.describe());
  if (q.dim() != 3) fail(op, ": q must be [N, Hq, D], got ", q.describe());
  if (k.dim() != 3) fail(op, ": k must be [N, Hkv, D], got ", k.describe());
  require(k, q.dtype(), {q.size(0), k.size(1), q.size(2)}, op, "k");
  require(v, q.dtype(), {q.size(0), k.size(1), q.size(2)}, op, "v");
  return problem_for(op, q.dtype(), q.size(0), q.size(1), k.size(1), q.size(2), cu, lens, a);
}

// The problem of N token rows with Hq query / Hkv key-value heads of D (checked), batch layout
// from cu_seqlens / seq_lens and the shape hints.
Problem problem_for(const char* op, DType dtype, int64_t N, int64_t Hq, int64_t Hkv, int64_t D, const Tensor& cu,
                    const Tensor& lens, const AttentionShape& a) {
  Problem p;
  p.dtype = dtype;
  p.N = N;
  p.Hq = Hq;
  p.D = D;
  p.Hkv = Hkv;
  if (p.Hkv <= 0 || p.Hq % p.Hkv != 0)
    fail(op, ": query heads (", p.Hq, ") must be a multiple of kv heads (", p.Hkv, ")");
  if (p.D < 1 || p.D > 128) fail(op, ": head dim ", p.D, " is not supported on the GPU (1..128)");
  require_cuda(cu, op, "cu_seqlens");
  require_cuda(lens, op, "seq_lens");
  if (cu.dtype() != DType::I32 || lens.dtype() != DType::I32 || cu.dim() != 1 || lens.dim() != 1 ||
      cu.numel() != lens.numel() + 1)
    fail(op, ": cu_seqlens must be I32[B+1] and seq_lens I32[B], got ", cu.describe(), " and ",
         lens.describe());
  p.B = lens.numel();
  const bool check = op_options().attention_check;
  p.max_seqlen = a.max_seqlen;
  if (a.uniform && (a.max_seqlen <= 0 || p.N != p.B * int64_t(a.max_seqlen)))
    fail(op, ": AttentionShape.uniform needs N == B·max_seqlen, got N = ", p.N, ", B = ", p.B,
         ", max_seqlen = ", a.max_seqlen);
  p.uniform = a.uniform;
  if (p.B > 0 && (check || a.max_seqlen <= 0)) {
    const int64_t mx = inspect_layout(op, cu, lens, p.N, a.max_seqlen, check, a.uniform);
    if (a.max_seqlen <= 0) {
      warn_once(std::string(op) +
                ": AttentionShape.max_seqlen not set; reading seq_lens back from the GPU (a sync per call)");
      p.max_seqlen = mx;
    }
  }
  return p;
}


std::string shape_line(const char* dir, const Problem& p, const AttentionShape& a) {
  return std::string(dir) + " " + dtype_name(p.dtype) + " Hq=" + std::to_string(p.Hq) +
         " Hkv=" + std::to_string(p.Hkv) + " D=" + std::to_string(p.D) +
         (a.causal ? " causal" : " bidirectional");
}

// Whether to try cuDNN for this call (Cudnn: yes or fail; Fallback: no).
AttentionPath choose(AttentionPath requested, const Problem& p, const char* op,
                     std::initializer_list<const Tensor*> tensors) {
  if (requested == AttentionPath::Fallback) return AttentionPath::Fallback;
  std::string why;
  if (!cudnn_sdpa_supported(p.dtype, p.D, p.Hq, p.Hkv, &why)) {
    if (requested == AttentionPath::Cudnn)
      fail(op, ": the cuDNN attention path was requested but does not take this shape: ", why);
    return AttentionPath::Fallback;
  }
  for (const Tensor* t : tensors) {
    if (t && t->defined() && !aligned16(t->raw())) {
      if (requested == AttentionPath::Cudnn)
        fail(op, ": the cuDNN attention path needs 16-byte aligned tensors; ", t->describe(), " is not");
      warn_once(std::string(op) + ": a tensor is not 16-byte aligned; using the CUDA fallback");
      return AttentionPath::Fallback;
    }
  }
  return AttentionPath::Cudnn;
}

// The shape fields of a cuDNN call (those that pick its graph), filled in this one place for the
// passes and for the graphs attention_prepare_forward builds ahead, so both name the same graph.
// Pointers are left for the caller; qkv_row as in SdpaCall.
SdpaCall sdpa_call_for(const Problem& p, const AttentionShape& a, bool packed_qkv) {
  SdpaCall c;
  c.N = p.N, c.B = p.B, c.Hq = p.Hq, c.Hkv = p.Hkv, c.D = p.D, c.max_seqlen = p.max_seqlen;
  c.scale = a.scale, c.causal = a.causal, c.uniform = p.uniform;
  c.qkv_row = packed_qkv ? (p.Hq + 2 * p.Hkv) * p.D : 0;
  return c;
}

}  // namespace

AttentionPath attention_path_for(AttentionPath requested, DType dtype, int64_t head_dim, int64_t hq,
                                 int64_t hkv) {
  if (requested == AttentionPath::Fallback) return AttentionPath::Fallback;
  if (requested == AttentionPath::Cudnn) return AttentionPath::Cudnn;
  return cudnn_sdpa_supported(dtype, head_dim, hq, hkv) ? AttentionPath::Cudnn : AttentionPath::Fallback;
}

void launch_sdpa_offsets(const int32_t* cu_seqlens, const int32_t* seq_lens, int64_t B,
                         int64_t B_bucket, int64_t qo_mult, int64_t kv_mult, int64_t stats_mult,
                         int32_t* seq_len, int64_t* off_qo, int64_t* off_kv, int64_t* off_stats) {
  const int64_t n = B_bucket + 1;
  const unsigned blocks = unsigned(std::min<int64_t>(ceil_div(n, kThreads), 1024));
  sdpa_offsets_kernel<<<blocks, kThreads, 0, cuda_ctx::stream()>>>(
      cu_seqlens, seq_lens, B, B_bucket, qo_mult, kv_mult, stats_mult, seq_len, off_qo, off_kv,
      off_stats);
  BIOFM_CUDA_LAUNCH_CHECK();
}

void launch_lse_to_bhs(const float* lse, int64_t B, int64_t S, int64_t Hq, float* bhs) {
  const int64_t n = B * S * Hq;
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<int64_t>(ceil_div(n, kThreads), 4096));
  lse_to_bhs_kernel<<<blocks, kThreads, 0, cuda_ctx::stream()>>>(lse, B, S, Hq, bhs);
  BIOFM_CUDA_LAUNCH_CHECK();
}

void attention_forward_with(AttentionPath path, Tensor& out, Tensor& lse, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                            const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_forward (CUDA)";
  const Problem p = make_problem(op, q, k, v, cu_seqlens, seq_lens, a);
  require(out, p.dtype, q.shape(), op, "out");
  if (lse.defined()) require(lse, DType::F32, {p.N, p.Hq}, op, "lse");
  if (p.N == 0) return;
  const int64_t row_q = p.Hq * p.D;
  if (p.B == 0 || p.max_seqlen == 0) {
    zero_padding(p, cu_seqlens, seq_lens, {{&out, row_q}, {&lse, p.Hq}});
    return;
  }

  const AttentionPath chosen = choose(path, p, op, {&q, &k, &v, &out, &lse});
  if (chosen == AttentionPath::Cudnn) {
    // cuDNN always writes the statistics: give it a scratch lse when the caller wants none.
    Tensor lse_buf = lse.defined() ? lse : Tensor::empty({p.N, p.Hq}, DType::F32, Device::CUDA);
    SdpaCall c = sdpa_call_for(p, a, /*packed_qkv=*/false);
    c.cu_seqlens = cu_seqlens.i32(), c.seq_lens = seq_lens.i32();
    c.q = q.raw(), c.k = k.raw(), c.v = v.raw(), c.out = out.raw(), c.lse = lse_buf.f32();
    std::string why;
    if (cudnn_sdpa_forward(c, &why)) {
      verbose_once(shape_line("forward", p, a) + " -> cudnn");
      zero_padding(p, cu_seqlens, seq_lens, {{&out, row_q}, {&lse, p.Hq}});
      return;
    }
    if (path == AttentionPath::Cudnn) fail(op, ": cuDNN path requested but failed: ", why);
    verbose_once(shape_line("forward", p, a) + " -> fallback (cuDNN failed: " + why + ")");
  } else {
    verbose_once(shape_line("forward", p, a) + " -> fallback");
  }
  float* lp = lse.defined() ? lse.f32() : nullptr;
  if (p.dtype == DType::BF16)
    fallback_forward<__nv_bfloat16>(p, a, q, k, v, out, lp, cu_seqlens, seq_lens);
  else
    fallback_forward<float>(p, a, q, k, v, out, lp, cu_seqlens, seq_lens);
  zero_padding(p, cu_seqlens, seq_lens, {{&out, row_q}, {&lse, p.Hq}});
}

void attention_backward_with(AttentionPath path, Tensor& dq, Tensor& dk, Tensor& dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                             const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_backward (CUDA)";
  const Problem p = make_problem(op, q, k, v, cu_seqlens, seq_lens, a);
  require(dout, p.dtype, q.shape(), op, "dout");
  require(out, p.dtype, q.shape(), op, "out");
  require(lse, DType::F32, {p.N, p.Hq}, op, "lse");
  require(dq, p.dtype, q.shape(), op, "dq");
  require(dk, p.dtype, k.shape(), op, "dk");
  require(dv, p.dtype, v.shape(), op, "dv");
  if (p.N == 0) return;
  const int64_t row_q = p.Hq * p.D, row_kv = p.Hkv * p.D;
  auto zero_pad = [&] {
    zero_padding(p, cu_seqlens, seq_lens, {{&dq, row_q}, {&dk, row_kv}, {&dv, row_kv}});
  };
  if (p.B == 0 || p.max_seqlen == 0) return zero_pad();

  const AttentionPath chosen = choose(path, p, op, {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv});
  if (chosen == AttentionPath::Cudnn) {
    SdpaCall c = sdpa_call_for(p, a, /*packed_qkv=*/false);
    c.cu_seqlens = cu_seqlens.i32(), c.seq_lens = seq_lens.i32();
    c.q = q.raw(), c.k = k.raw(), c.v = v.raw(), c.out = out.raw(), c.lse = lse.f32();
    c.dout = dout.raw(), c.dq = dq.raw(), c.dk = dk.raw(), c.dv = dv.raw();
    std::string why;
    if (cudnn_sdpa_backward(c, &why)) {
      verbose_once(shape_line("backward", p, a) + " -> cudnn");
      return zero_pad();
    }
    if (path == AttentionPath::Cudnn) fail(op, ": cuDNN path requested but failed: ", why);
    verbose_once(shape_line("backward", p, a) + " -> fallback (cuDNN failed: " + why + ")");
  } else {
    verbose_once(shape_line("backward", p, a) + " -> fallback");
  }
  if (p.dtype == DType::BF16)
    fallback_backward<__nv_bfloat16>(p, a, dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens, seq_lens);
  else
    fallback_backward<float>(p, a, dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens, seq_lens);
  zero_pad();
}

namespace {

// The packed qkv[N, (Hq + 2·Hkv)·D] of attention_*_packed, checked: its problem.
Problem packed_problem(const char* op, const Tensor& qkv, const QkvHeads& h, const Tensor& cu, const Tensor& lens,
                       const AttentionShape& a) {
  require_cuda(qkv, op, "qkv");
  if (qkv.dtype() != DType::F32 && qkv.dtype() != DType::BF16) fail(op, ": qkv must be F32 or BF16, got ", qkv.describe());
  const int64_t row = (h.hq + 2 * h.hkv) * h.head_dim;
  if (h.hq <= 0 || h.hkv <= 0 || h.head_dim <= 0 || qkv.dim() != 2 || qkv.size(1) != row)
    fail(op, ": qkv must be [N, (Hq + 2·Hkv)·D] = [N, ", row, "] for Hq = ", h.hq, ", Hkv = ", h.hkv, ", D = ",
         h.head_dim, "; got ", qkv.describe());
  return problem_for(op, qkv.dtype(), qkv.size(0), h.hq, h.hkv, h.head_dim, cu, lens, a);
}

struct SeparateQkv {
  Tensor q, k, v;
};
SeparateQkv separate_qkv(const Problem& p) {
  return {Tensor::empty({p.N, p.Hq, p.D}, p.dtype, Device::CUDA), Tensor::empty({p.N, p.Hkv, p.D}, p.dtype, Device::CUDA),
          Tensor::empty({p.N, p.Hkv, p.D}, p.dtype, Device::CUDA)};
}

// Copies q, k, v between the packed rows and separate tensors (pack: into the rows), for the
// paths that read separate tensors.
void move_packed(const Problem& p, const Tensor& qkv, const Tensor& q, const Tensor& k, const Tensor& v, bool pack) {
  const size_t es = dtype_size(p.dtype), row = size_t((p.Hq + 2 * p.Hkv) * p.D) * es;
  const size_t wq = size_t(p.Hq * p.D) * es, wkv = size_t(p.Hkv * p.D) * es;
  char* base = static_cast<char*>(qkv.raw());
  const std::pair<const Tensor*, std::pair<size_t, size_t>> parts[] = {
      {&q, {0, wq}}, {&k, {wq, wkv}}, {&v, {wq + wkv, wkv}}};
  for (const auto& [t, at] : parts) {
    char* in_row = base + at.first;
    char* own = static_cast<char*>(t->raw());
    BIOFM_CUDA_CHECK(cudaMemcpy2DAsync(pack ? in_row : own, pack ? row : at.second, pack ? own : in_row,
                                       pack ? at.second : row, at.second, size_t(p.N), cudaMemcpyDeviceToDevice,
                                       cuda_ctx::stream()));
  }
}

SdpaCall packed_call(const Problem& p, const AttentionShape& a, const Tensor& cu, const Tensor& lens,
                     const Tensor& qkv) {
  SdpaCall c = sdpa_call_for(p, a, /*packed_qkv=*/true);
  c.cu_seqlens = cu.i32(), c.seq_lens = lens.i32();
  const char* base = static_cast<const char*>(qkv.raw());
  const size_t es = dtype_size(p.dtype);
  c.q = base;
  c.k = base + size_t(p.Hq * p.D) * es;
  c.v = base + size_t((p.Hq + p.Hkv) * p.D) * es;
  return c;
}

}  // namespace

void attention_forward_packed_with(AttentionPath path, Tensor& out, Tensor& lse, const Tensor& qkv,
                                   const QkvHeads& h, const Tensor& cu_seqlens, const Tensor& seq_lens,
                                   const AttentionShape& a) {
  const char* op = "attention_forward_packed (CUDA)";
  const Problem p = packed_problem(op, qkv, h, cu_seqlens, seq_lens, a);
  require(out, p.dtype, {p.N, p.Hq, p.D}, op, "out");
  if (lse.defined()) require(lse, DType::F32, {p.N, p.Hq}, op, "lse");
  if (p.N == 0) return;
  if (p.B > 0 && p.max_seqlen > 0 && choose(path, p, op, {&qkv, &out, &lse}) == AttentionPath::Cudnn) {
    Tensor lse_buf = lse.defined() ? lse : Tensor::empty({p.N, p.Hq}, DType::F32, Device::CUDA);
    SdpaCall c = packed_call(p, a, cu_seqlens, seq_lens, qkv);
    c.out = out.raw(), c.lse = lse_buf.f32();
    std::string why;
    if (cudnn_sdpa_forward(c, &why)) {
      verbose_once(shape_line("forward", p, a) + " packed qkv -> cudnn");
      zero_padding(p, cu_seqlens, seq_lens, {{&out, p.Hq * p.D}, {&lse, p.Hq}});
      return;
    }
    if (path == AttentionPath::Cudnn) fail(op, ": cuDNN path requested but failed: ", why);
    verbose_once(shape_line("forward", p, a) + " packed qkv: cuDNN failed (" + why + "); unpacking");
  }
  // Every other case: the general op on unpacked copies (which may still take cuDNN's graph for
  // separate tensors).
  const SeparateQkv s = separate_qkv(p);
  move_packed(p, qkv, s.q, s.k, s.v, /*pack=*/false);
  attention_forward_with(path, out, lse, s.q, s.k, s.v, cu_seqlens, seq_lens, a);
}

void attention_backward_packed_with(AttentionPath path, Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                    const QkvHeads& h, const Tensor& out, const Tensor& lse,
                                    const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_backward_packed (CUDA)";
  const Problem p = packed_problem(op, qkv, h, cu_seqlens, seq_lens, a);
  require(dqkv, p.dtype, qkv.shape(), op, "dqkv");
  require(dout, p.dtype, {p.N, p.Hq, p.D}, op, "dout");
  require(out, p.dtype, {p.N, p.Hq, p.D}, op, "out");
  require(lse, DType::F32, {p.N, p.Hq}, op, "lse");
  if (p.N == 0) return;
  const int64_t row = (p.Hq + 2 * p.Hkv) * p.D;
  if (p.B > 0 && p.max_seqlen > 0 &&
      choose(path, p, op, {&qkv, &dqkv, &dout, &out, &lse}) == AttentionPath::Cudnn) {
    SdpaCall c = packed_call(p, a, cu_seqlens, seq_lens, qkv);
    c.out = out.raw(), c.lse = lse.f32(), c.dout = dout.raw();
    char* d = static_cast<char*>(dqkv.raw());
    const size_t es = dtype_size(p.dtype);
    c.dq = d, c.dk = d + size_t(p.Hq * p.D) * es, c.dv = d + size_t((p.Hq + p.Hkv) * p.D) * es;
    std::string why;
    if (cudnn_sdpa_backward(c, &why)) {
      verbose_once(shape_line("backward", p, a) + " packed qkv -> cudnn");
      zero_padding(p, cu_seqlens, seq_lens, {{&dqkv, row}});
      return;
    }
    if (path == AttentionPath::Cudnn) fail(op, ": cuDNN path requested but failed: ", why);
    verbose_once(shape_line("backward", p, a) + " packed qkv: cuDNN failed (" + why + "); unpacking");
  }
  const SeparateQkv s = separate_qkv(p);
  move_packed(p, qkv, s.q, s.k, s.v, /*pack=*/false);
  SeparateQkv d = separate_qkv(p);
  attention_backward_with(path, d.q, d.k, d.v, dout, s.q, s.k, s.v, out, lse, cu_seqlens, seq_lens, a);
  move_packed(p, dqkv, d.q, d.k, d.v, /*pack=*/true);
}

}  // namespace attention_detail

void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  attention_detail::attention_forward_with(op_options().attention, out, lse, q, k, v, cu_seqlens,
                                           seq_lens, a);
}

void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  attention_detail::attention_backward_with(op_options().attention, dq, dk, dv, dout, q, k, v,
                                            out, lse, cu_seqlens, seq_lens, a);
}

void attention_forward_packed(Tensor& out, Tensor& lse, const Tensor& qkv, const QkvHeads& heads,
                              const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  attention_detail::attention_forward_packed_with(op_options().attention, out, lse, qkv, heads, cu_seqlens,
                                                  seq_lens, a);
}

void attention_backward_packed(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const QkvHeads& heads,
                               const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                               const Tensor& seq_lens, const AttentionShape& a) {
  attention_detail::attention_backward_packed_with(op_options().attention, dqkv, dout, qkv, heads, out, lse,
                                                   cu_seqlens, seq_lens, a);
}

void attention_prepare_forward(Device, DType dtype, const std::vector<AttentionBatch>& batches, const QkvHeads& h,
                               bool causal) {
  using namespace attention_detail;
  if (attention_path_for(op_options().attention, dtype, h.head_dim, h.hq, h.hkv) != AttentionPath::Cudnn) return;
  std::vector<SdpaCall> calls;
  for (const AttentionBatch& b : batches) {
    if (b.sequences <= 0 || b.max_seqlen <= 0) continue;
    Problem p;
    p.N = b.rows, p.B = b.sequences, p.Hq = h.hq, p.Hkv = h.hkv, p.D = h.head_dim, p.max_seqlen = b.max_seqlen;
    p.uniform = b.uniform, p.dtype = dtype;
    AttentionShape a;
    a.causal = causal, a.max_seqlen = b.max_seqlen, a.uniform = b.uniform;
    calls.push_back(sdpa_call_for(p, a, b.packed_qkv));
  }
  cudnn_sdpa_prebuild(calls, /*backward=*/false);
}

// Context parallelism's share attention has a CPU reference only so far (the trainer refuses
// cp_size > 1 on the GPU before any work); these say so should anything else call them.
void attention_forward_packed_rows(Tensor&, Tensor&, const Tensor&, const QkvHeads&, const Tensor&, const Tensor&,
                                   const Tensor&, const AttentionShape&) {
  fail("attention_forward_packed_rows: context parallelism's attention is not built for the GPU yet");
}
void attention_backward_packed_rows(Tensor&, Tensor&, const Tensor&, const Tensor&, const QkvHeads&, const Tensor&,
                                    const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                    const AttentionShape&) {
  fail("attention_backward_packed_rows: context parallelism's attention is not built for the GPU yet");
}

}  // namespace biofm::ops::cuda
