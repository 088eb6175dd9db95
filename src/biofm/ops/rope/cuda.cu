// Rotary position embedding (rotate-half form), CUDA, in place on x[N, H, D].
//
// One thread per (token, group of VEC frequencies): it forms the angles once (in double, as the
// CPU reference rounds cos/sin of the fp32 angle) and rotates the pairs (i, i + D/2) of every
// head of that token. Consecutive threads take consecutive frequencies, so each head's loads
// and stores are contiguous; VEC = 4, 2 or 1 consecutive elements per access as D/2 and the
// alignment allow.
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/rope/op.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;

namespace {

template <class T, int VEC>
__global__ void rope_kernel(T* x, const int32_t* positions, const float* inv_freq, int64_t N, int H,
                            int half, bool inverse) {
  const int groups = half / VEC;
  const int64_t total = N * groups;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = idx / groups;
    const int i0 = int(idx - n * groups) * VEC;
    const float p = float(positions[n]);
    float cs[VEC], sn[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      // The angle in fp32 (position · inv_freq, as Hugging Face), its cos / sin in double.
      const float a = p * inv_freq[i0 + j];
      double s, c;
      sincos(double(a), &s, &c);
      cs[j] = float(c);
      sn[j] = inverse ? -float(s) : float(s);
    }
    T* base = x + n * int64_t(H) * (2 * half) + i0;
#pragma unroll 4
    for (int h = 0; h < H; ++h) {
      T* v = base + int64_t(h) * (2 * half);
      float x1[VEC], x2[VEC], y1[VEC], y2[VEC];
      load_vec<VEC>(x1, v);
      load_vec<VEC>(x2, v + half);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        y1[j] = x1[j] * cs[j] - x2[j] * sn[j];
        y2[j] = x2[j] * cs[j] + x1[j] * sn[j];
      }
      store_vec<VEC>(v, y1);
      store_vec<VEC>(v + half, y2);
    }
  }
}

}  // namespace

void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) {
  const char* op = "rope_apply";
  require_float(x, op, "x");
  require_dtype(positions, DType::I32, op, "positions");
  require_dtype(inv_freq, DType::F32, op, "inv_freq");
  if (x.dim() != 3) fail(op, ": x must be [N, H, D], got ", x.describe());
  const int64_t N = x.size(0), H = x.size(1), D = x.size(2);
  if (D % 2 != 0) fail(op, ": head dimension must be even, got ", x.describe());
  const int64_t half = D / 2;
  require_shape(positions, {N}, op, "positions");
  require_shape(inv_freq, {half}, op, "inv_freq");
  if (N == 0 || H == 0 || half == 0) return;
  dispatch_float(x.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    T* p = static_cast<T*>(x.raw());
    const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    auto go = [&](auto vec_c) {
      constexpr int VEC = decltype(vec_c)::value;
      const int64_t total = N * (half / VEC);
      rope_kernel<T, VEC><<<grid_for(total, 256, 16), 256, 0, cuda_ctx::stream()>>>(
          p, positions.i32(), inv_freq.f32(), N, int(H), int(half), inverse);
      BIOFM_CUDA_LAUNCH_CHECK();
    };
    if (half % 4 == 0 && addr % (4 * sizeof(T)) == 0)
      go(std::integral_constant<int, 4>{});
    else if (half % 2 == 0 && addr % (2 * sizeof(T)) == 0)
      go(std::integral_constant<int, 2>{});
    else
      go(std::integral_constant<int, 1>{});
  });
}

}  // namespace biofm::ops::cuda
