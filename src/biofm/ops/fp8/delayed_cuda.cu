// FP8 delayed scaling on the GPU: the amax of a tensor max-folded into its history slot, and
// one launch that rolls every tensor's history and updates its scale (delayed_cpu.cpp is the
// reference; the definition is in delayed.h). No host reads.
#include <cfloat>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/fp8/codes.cuh"
#include "biofm/ops/fp8/delayed.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

// slot = max(slot, max |x|): non-negative floats (and NaN, whose bits are larger) order as
// their bit patterns, so an unsigned atomicMax folds them. vec (x 16-byte aligned): 16-byte
// loads, four in flight per thread (a scalar loop ran at a sixth of the bandwidth, session 22).
template <class T>
__global__ void record_kernel(const T* x, int64_t n, const float* given, unsigned* slot, bool vec) {
  unsigned m = 0;  // max of the bit patterns of |x|: NaN (an overflow upstream) wins, as it must
  if (given) {
    if (blockIdx.x == 0 && threadIdx.x == 0) m = __float_as_uint(fabsf(*given));
  } else {
    fp8_codes::for_each_abs(x, n, vec, [&](float a) { m = max(m, __float_as_uint(a)); });
  }
  fp8_codes::record_bits_into(slot, m);
}

constexpr int kUpdateThreads = 128;

// One block per tensor.
__global__ void __launch_bounds__(kUpdateThreads)
    update_kernel(float* history, int64_t L, float* scale_amax, int margin, bool use_max) {
  __shared__ float part[kUpdateThreads];
  float* h = history + int64_t(blockIdx.x) * L;
  const float last = h[0];
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) amax = fmaxf(amax, h[i]);
  part[threadIdx.x] = amax;
  __syncthreads();  // every read of h is done before the roll writes
  for (int off = kUpdateThreads / 2; off > 0; off /= 2) {
    if (threadIdx.x < off) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + off]);
    __syncthreads();
  }
  // roll: h'[i] = h[i+1], h'[L-1] = last, h'[0] = 0 (read all, then write: blocks of threads)
  for (int64_t base = 0; base < L; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    float v = 0.0f;
    if (i < L) v = i + 1 < L ? h[i + 1] : last;
    __syncthreads();
    if (i < L) h[i] = i == 0 ? 0.0f : v;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float a = use_max ? part[0] : last;
    if (isfinite(a) && a > 0.0f) scale_amax[blockIdx.x] = fminf(ldexpf(a, margin), FLT_MAX);
  }
}

}  // namespace

void fp8_amax_record(Tensor& history_row, const Tensor& x, const Tensor& amax_in) {
  const char* op = "fp8_amax_record";
  require_dtype(history_row, DType::F32, op, "history_row");
  if (history_row.numel() < 1) fail(op, ": history_row is empty");
  cudaStream_t st = cuda_ctx::stream();
  unsigned* slot = static_cast<unsigned*>(history_row.raw());
  if (amax_in.defined()) {
    require_dtype(amax_in, DType::F32, op, "amax_in");
    record_kernel<float><<<1, 32, 0, st>>>(nullptr, 0, amax_in.f32(), slot, false);
  } else {
    require_float(x, op, "x");
    const int64_t n = x.numel();
    if (n == 0) return;
    dispatch_float(x.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const bool vec = aligned16(x);
      const int64_t per_thread = vec ? 16 / int64_t(sizeof(T)) : 1;
      record_kernel<T><<<grid_for(n / per_thread + 1, 256, sm_waves(8)), 256, 0, st>>>(
          static_cast<const T*>(x.raw()), n, nullptr, slot, vec);
    });
  }
  BIOFM_CUDA_LAUNCH_CHECK();
}

void fp8_delayed_update(Tensor& amax_history, Tensor& scale_amax, int margin, bool use_max) {
  const char* op = "fp8_delayed_update";
  require_dtype(amax_history, DType::F32, op, "amax_history");
  require_dtype(scale_amax, DType::F32, op, "scale_amax");
  if (amax_history.dim() != 2 || scale_amax.numel() != amax_history.size(0))
    fail(op, ": amax_history [N, L] and scale_amax [N] expected, got ", amax_history.describe(), " and ",
         scale_amax.describe());
  if (margin < 0) fail(op, ": margin must be >= 0, got ", margin);
  const int64_t N = amax_history.size(0);
  if (N == 0) return;
  if (N > 65535 * 1024) fail(op, ": too many tensors (", N, ")");
  update_kernel<<<unsigned(N), kUpdateThreads, 0, cuda_ctx::stream()>>>(amax_history.f32(), amax_history.size(1),
                                                                      scale_amax.f32(), margin, use_max);
  BIOFM_CUDA_LAUNCH_CHECK();
}

}  // namespace biofm::ops::cuda
