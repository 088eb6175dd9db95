// Softmax cross-entropy with ignore index -100, fused with its gradient, CUDA.
//
// A row of V logits belongs to one warp (V <= 1024: 8 rows per block) or to a whole block
// (larger vocabularies). Pass 1 reads the row once, in chunks of VEC (16-byte loads when V % 8 == 0
// and the pointers are aligned), keeping an online (max, Σ exp(x - max)) per thread; the pairs
// are merged across the warp / block. Pass 2 (only when dlogits is wanted) re-reads the row,
// which is still in L1 / L2, and writes (softmax - onehot) · grad_scale. dlogits may alias
// logits: every element is read by the thread that later overwrites it, and the label's logit
// is read before the reduction that separates the passes.
//
// Labels outside [0, V) other than -100 cannot throw from the GPU without a host
// synchronisation: such rows get a NaN loss and NaN gradients, so the step's loss shows them.
#include <algorithm>
#include <cmath>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/loss/op.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

struct MaxSum {
  float m, s;
};

// Merge two online-softmax states (m = -inf means "no element yet", with s = 0).
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  const float sa = a.m == -INFINITY ? 0.0f : a.s * expf(a.m - m);
  const float sb = b.m == -INFINITY ? 0.0f : b.s * expf(b.m - m);
  return {m, sa + sb};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum y{__shfl_xor_sync(0xffffffffu, x.m, o), __shfl_xor_sync(0xffffffffu, x.s, o)};
    x = merge(x, y);
  }
  return x;
}

// `tpr` threads per row (32, or the whole block when larger: then one row per block).
template <class T, class D, int VEC>
__global__ void cross_entropy_kernel(float* token_loss, D* dlogits, const T* logits,
                                     const int32_t* labels, int64_t N, int64_t V, float grad_scale,
                                     int tpr) {
  __shared__ MaxSum red[32];
  const int rpb = blockDim.x / tpr;
  const int g = threadIdx.x / tpr, t = threadIdx.x % tpr;
  const int lane = t & 31, warp = t >> 5, nw = tpr >> 5;
  const int64_t chunks = V / VEC;

  for (int64_t row = int64_t(blockIdx.x) * rpb + g; row < N; row += int64_t(gridDim.x) * rpb) {
    // Uniform across the row's threads; when nw > 1 the row is the whole block's.
    const int32_t y = labels[row];
    const T* x = logits + row * V;
    D* dx = dlogits ? dlogits + row * V : nullptr;
    if (y == kIgnoreIndex) {
      if (t == 0 && token_loss) token_loss[row] = 0.0f;
      if (dx) {
        float z[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) z[i] = 0.0f;
        for (int64_t ch = t; ch < chunks; ch += tpr) store_vec<VEC>(dx + ch * VEC, z);
      }
      continue;
    }
    const bool bad = y < 0 || y >= V;
    const float x_label = bad ? NAN : to_f32(x[y]);  // read before anything is written

    MaxSum st{-INFINITY, 0.0f};
    for (int64_t ch = t; ch < chunks; ch += tpr) {
      float v[VEC];
      load_vec<VEC>(v, x + ch * VEC);
      float cm = v[0];
#pragma unroll
      for (int i = 1; i < VEC; ++i) cm = fmaxf(cm, v[i]);
      const float m = fmaxf(st.m, cm);
      if (m != -INFINITY) {
        float s = st.m == -INFINITY ? 0.0f : st.s * expf(st.m - m);
#pragma unroll
        for (int i = 0; i < VEC; ++i) s += expf(v[i] - m);
        st = {m, s};
      }
    }
    st = warp_merge(st);
    __syncwarp();  // orders every lane's reads above before any lane's writes below
    if (nw > 1) {
      if (lane == 0) red[warp] = st;
      __syncthreads();
      st = red[0];
      for (int w = 1; w < nw; ++w) st = merge(st, red[w]);
      __syncthreads();  // red is reused by the next row
    }
    // loss = lse - x[y] = (max - x[y]) + log Σ exp(x - max): the difference first, exactly.
    const float log_s = logf(st.s);
    if (t == 0 && token_loss) token_loss[row] = bad ? NAN : (st.m - x_label) + log_s;
    if (dx) {
      for (int64_t ch = t; ch < chunks; ch += tpr) {
        float v[VEC];
        load_vec<VEC>(v, x + ch * VEC);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const float p = bad ? NAN : expf((v[i] - st.m) - log_s);
          v[i] = (p - (ch * VEC + i == y ? 1.0f : 0.0f)) * grad_scale;
        }
        store_vec<VEC>(dx + ch * VEC, v);
      }
    }
  }
}

}  // namespace

void cross_entropy_forward_backward(Tensor& token_loss, Tensor& dlogits, const Tensor& logits,
                                    const Tensor& labels, float grad_scale) {
  const char* op = "cross_entropy_forward_backward";
  require_float(logits, op, "logits");
  require_dtype(labels, DType::I32, op, "labels");
  if (logits.dim() != 2) fail(op, ": logits must be [N, V], got ", logits.describe());
  const int64_t N = logits.size(0), V = logits.size(1);
  require_shape(labels, {N}, op, "labels");
  if (token_loss.defined()) {
    require_dtype(token_loss, DType::F32, op, "token_loss");
    require_shape(token_loss, {N}, op, "token_loss");
  }
  if (dlogits.defined()) {
    require_float(dlogits, op, "dlogits");
    require_shape(dlogits, {N, V}, op, "dlogits");
  }
  if (N == 0 || (!token_loss.defined() && !dlogits.defined())) return;
  // Label values live on the GPU and are not validated here (that would need a
  // synchronisation): out-of-range labels give NaN loss and gradients for their rows.
  const bool vec8 = V % 8 == 0 && aligned16(logits) && aligned16(dlogits);
  int tpr, threads;
  if (V <= 1024) {
    tpr = 32;
    threads = 256;
  } else {
    tpr = threads = V <= 4096 ? 128 : (V <= 32768 ? 256 : 512);
  }
  const int rpb = threads / tpr;
  const unsigned grid = grid_for(N, rpb, sm_waves(2048 / threads * 2));
  float* tl = token_loss.defined() ? token_loss.f32() : nullptr;
  dispatch_float(logits.dtype(), op, [&](auto lt) {
    using T = typename decltype(lt)::type;
    const T* lp = static_cast<const T*>(logits.raw());
    dispatch_float(dlogits.defined() ? dlogits.dtype() : logits.dtype(), op, [&](auto dt) {
      using D = typename decltype(dt)::type;
      D* dp = dlogits.defined() ? static_cast<D*>(dlogits.raw()) : nullptr;
      if (vec8)
        cross_entropy_kernel<T, D, 8><<<grid, threads, 0, cuda_ctx::stream()>>>(
            tl, dp, lp, labels.i32(), N, V, grad_scale, tpr);
      else
        cross_entropy_kernel<T, D, 1><<<grid, threads, 0, cuda_ctx::stream()>>>(
            tl, dp, lp, labels.i32(), N, V, grad_scale, tpr);
      BIOFM_CUDA_LAUNCH_CHECK();
    });
  });
}

namespace {

// One block: each thread counts a strided share, then a block reduction (exact in F32 below 2^24).
__global__ void count_labels_kernel(const int32_t* labels, int64_t n, float* count) {
  __shared__ float partial[32];
  int c = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) c += labels[i] != kIgnoreIndex;
  float v = warp_sum(float(c));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.0f;
    v = warp_sum(v);
    if (threadIdx.x == 0) count[0] += v;
  }
}

}  // namespace

void count_labels_accumulate(Tensor& count, const Tensor& labels) {
  const char* op = "count_labels_accumulate";
  require_dtype(labels, DType::I32, op, "labels");
  require_dtype(count, DType::F32, op, "count");
  if (count.numel() != 1) fail(op, ": count must hold one element, got ", count.describe());
  count_labels_kernel<<<1, 1024, 0, cuda_ctx::stream()>>>(labels.i32(), labels.numel(), count.f32());
  BIOFM_CUDA_LAUNCH_CHECK();
}

}  // namespace biofm::ops::cuda
