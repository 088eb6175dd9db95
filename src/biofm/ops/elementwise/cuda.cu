// Small elementwise helpers, CUDA: y += x, dtype casts, and a device-side sum.
// Arithmetic in fp32; bf16 results rounded to nearest even. 16-byte accesses when every
// pointer allows them. All work is queued on the compute stream; nothing waits for it.
#include <cuda_bf16.h>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/elementwise/op.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

template <class T>
struct AddFn {
  T* y;
  const T* x;
  template <int V>
  __device__ void run(int64_t i) const {
    Pack<T, V> a = load_pack<V>(y + i);
    const Pack<T, V> b = load_pack<V>(x + i);
#pragma unroll
    for (int j = 0; j < V; ++j) a.v[j] = from_f32<T>(to_f32(a.v[j]) + to_f32(b.v[j]));
    store_pack<V>(y + i, a);
  }
};

template <class D, class S>
struct CastFn {
  D* dst;
  const S* src;
  template <int V>
  __device__ void run(int64_t i) const {
    const Pack<S, V> a = load_pack<V>(src + i);
    Pack<D, V> b;
#pragma unroll
    for (int j = 0; j < V; ++j) b.v[j] = from_f32<D>(to_f32(a.v[j]));
    store_pack<V>(dst + i, b);
  }
};

template <class T>
void add_typed(T* y, const T* x, int64_t n) {
  constexpr int V = 16 / sizeof(T);
  if (aligned(y, 16) && aligned(x, 16))
    launch_vec_loop<V>(n, AddFn<T>{y, x});
  else
    launch_vec_loop<1>(n, AddFn<T>{y, x});
}

template <class D, class S>
void cast_typed(D* dst, const S* src, int64_t n) {
  constexpr int V = 4;  // 16 B of F32 on one side, 8 B of BF16 on the other
  if (aligned(dst, sizeof(D) * V) && aligned(src, sizeof(S) * V))
    launch_vec_loop<V>(n, CastFn<D, S>{dst, src});
  else
    launch_vec_loop<1>(n, CastFn<D, S>{dst, src});
}

// acc[0] += Σ partials, in one block.
__global__ void __launch_bounds__(kSumMaxBlocks) add_partials_kernel(const double* partials, int count, float* acc) {
  const double total = partial_sum_of(partials, count);
  if (threadIdx.x == 0) acc[0] += float(total);
}

}  // namespace

void add_inplace(Tensor& y, const Tensor& x) {
  const char* op = "add_inplace";
  require_float(y, op, "y");
  require_dtype(x, y.dtype(), op, "x");
  if (x.shape() != y.shape()) fail(op, ": x ", x.describe(), " must match y ", y.describe());
  const int64_t n = y.numel();
  if (y.dtype() == DType::F32)
    add_typed(y.f32(), x.f32(), n);
  else
    add_typed(static_cast<__nv_bfloat16*>(y.raw()), static_cast<const __nv_bfloat16*>(x.raw()), n);
}

void cast(Tensor& dst, const Tensor& src) {
  const char* op = "cast";
  require_cuda(src, op, "src");
  require_cuda(dst, op, "dst");
  if (dst.numel() != src.numel())
    fail(op, ": dst ", dst.describe(), " and src ", src.describe(), " differ in element count");
  const int64_t n = src.numel();
  if (n == 0) return;
  if (dst.dtype() == src.dtype()) {
    if (dst.raw() != src.raw())
      BIOFM_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                       cuda_ctx::stream()));
    return;
  }
  if (src.dtype() == DType::F32 && dst.dtype() == DType::BF16)
    cast_typed(static_cast<__nv_bfloat16*>(dst.raw()), src.f32(), n);
  else if (src.dtype() == DType::BF16 && dst.dtype() == DType::F32)
    cast_typed(dst.f32(), static_cast<const __nv_bfloat16*>(src.raw()), n);
  else
    fail(op, ": no conversion from ", src.describe(), " to ", dst.describe());
}

void sum_accumulate(Tensor& acc, const Tensor& x) {
  const char* op = "sum_accumulate";
  require_float(x, op, "x");
  require_dtype(acc, DType::F32, op, "acc");
  if (acc.numel() != 1) fail(op, ": acc must hold one element, got ", acc.describe());
  const int64_t n = x.numel();
  if (n == 0) return;
  const unsigned blocks = sum_blocks(n);
  Scratch partials(blocks * sizeof(double));
  if (x.dtype() == DType::F32)
    launch_sum_partials<float, false>(x.f32(), n, partials.as<double>());
  else
    launch_sum_partials<__nv_bfloat16, false>(static_cast<const __nv_bfloat16*>(x.raw()), n,
                                              partials.as<double>());
  add_partials_kernel<<<1, kSumMaxBlocks, 0, cuda_ctx::stream()>>>(partials.as<double>(), int(blocks),
                                                                  acc.f32());
  BIOFM_CUDA_LAUNCH_CHECK();
}

}  // namespace biofm::ops::cuda
