// attention_decode on the GPU (op.h): the new query rows of one sequence against its key/value
// cache, causal, fp32 math on F32 or BF16 tensors. Asynchronous on the compute stream.
//
// One block of kWarps warps per (new row i, query head h); the row's keys 0 .. q_start_pos+i
// are dealt to the warps in tiles of 32 (warp w takes tiles w, w + kWarps, ...). For a tile the
// warp computes the 32 scores one key at a time (lanes split the head dim, a shuffle reduction
// sums; coalesced reads of the key row), lane j keeping score j; then one online-softmax
// update per tile (running max m, running sum l, in base 2) and acc[d] = acc[d]·corr +
// Σ_j p_j·v_j[d], with the warp's accumulator in shared memory (lane owns d = lane + 32c).
// At the end the block merges the kWarps partial (m, l, acc) and writes out = acc / l.
// Shared memory: q row + kWarps accumulators of D floats + 32 probabilities per warp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "biofm/core/cuda_context.h"
#include "biofm/ops/attention/decode_args.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/cuda_util.cuh"

namespace biofm::ops::cuda {
namespace {

using namespace cuda_detail;
using attention_decode_detail::DecodeDims;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attn_decode_kernel(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
                       T* __restrict__ out, int Hq, int Hkv, int D, int64_t p0, float scale_log2) {
  extern __shared__ float smem[];
  float* q_s = smem;                      // [D]
  float* acc_all = q_s + D;               // [kWarps][D]
  float* p_all = acc_all + kWarps * D;    // [kWarps][32]
  float* m_s = p_all + kWarps * 32;       // [kWarps]
  float* l_s = m_s + kWarps;              // [kWarps]

  const int h = blockIdx.x, i = blockIdx.y;
  const int g = h / (Hq / Hkv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nk = p0 + i + 1;
  const int64_t ld = int64_t(Hkv) * D;  // cache row stride
  const T* kbase = kc + int64_t(g) * D;
  const T* vbase = vc + int64_t(g) * D;

  const T* qrow = q + (int64_t(i) * Hq + h) * D;
  for (int d = threadIdx.x; d < D; d += kThreads) q_s[d] = to_f32(qrow[d]);
  float* acc = acc_all + warp * D;
  float* p_s = p_all + warp * 32;
  for (int d = lane; d < D; d += 32) acc[d] = 0.0f;
  __syncthreads();

  float m = -INFINITY, l = 0.0f;
  for (int64_t base = int64_t(warp) * 32; base < nk; base += int64_t(kWarps) * 32) {
    const int cnt = int(nk - base < 32 ? nk - base : 32);
    float my_s = -INFINITY;
    for (int j = 0; j < cnt; ++j) {
      const T* kr = kbase + (base + j) * ld;
      float part = 0.0f;
      for (int d = lane; d < D; d += 32) part = fmaf(q_s[d], to_f32(kr[d]), part);
      part = warp_sum(part);
      if (lane == j) my_s = part * scale_log2;
    }
    const float m_new = fmaxf(m, warp_max(my_s));  // finite: the tile has >= 1 key
    const float corr = exp2f(m - m_new);           // 0 on the first tile (m = -inf)
    const float p = lane < cnt ? exp2f(my_s - m_new) : 0.0f;
    l = l * corr + warp_sum(p);
    m = m_new;
    p_s[lane] = p;
    __syncwarp();
    for (int d = lane; d < D; d += 32) {
      const T* vcol = vbase + base * ld + d;
      float a = acc[d] * corr;
      for (int j = 0; j < cnt; ++j) a = fmaf(p_s[j], to_f32(vcol[int64_t(j) * ld]), a);
      acc[d] = a;
    }
    __syncwarp();  // p_s is rewritten by the next tile
  }
  if (lane == 0) {
    m_s[warp] = m;
    l_s[warp] = l;
  }
  __syncthreads();

  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, m_s[w]);
  float L = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    if (m_s[w] != -INFINITY) L += l_s[w] * exp2f(m_s[w] - M);
  const float inv = 1.0f / L;
  T* orow = out + (int64_t(i) * Hq + h) * D;
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (m_s[w] != -INFINITY) o = fmaf(acc_all[w * D + d], exp2f(m_s[w] - M), o);
    orow[d] = from_f32<T>(o * inv);
  }
}

size_t decode_smem_bytes(int64_t D) {
  return sizeof(float) * size_t(D + kWarps * D + kWarps * 32 + 2 * kWarps);
}

}  // namespace

void attention_decode(Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      int64_t cache_len, int64_t q_start_pos, float scale) {
  const char* op = "attention_decode (CUDA)";
  const DecodeDims d = attention_decode_detail::check_decode_args(op, Device::CUDA, out, q, k_cache,
                                                                  v_cache, cache_len, q_start_pos);
  if (d.n_new == 0 || d.Hq == 0 || d.D == 0) return;
  if (d.n_new > 65535) fail(op, ": at most 65535 new rows per call, got ", d.n_new);
  const size_t smem = decode_smem_bytes(d.D);
  if (smem > 48 * 1024) fail(op, ": head dim ", d.D, " is too large (at most 1335)");
  const dim3 grid(unsigned(d.Hq), unsigned(d.n_new));
  dispatch_float(d.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attn_decode_kernel<T><<<grid, kThreads, smem, cuda_ctx::stream()>>>(
        static_cast<const T*>(q.raw()), static_cast<const T*>(k_cache.raw()),
        static_cast<const T*>(v_cache.raw()), static_cast<T*>(out.raw()), int(d.Hq), int(d.Hkv),
        int(d.D), q_start_pos, scale * kLog2e);
    BIOFM_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace biofm::ops::cuda
