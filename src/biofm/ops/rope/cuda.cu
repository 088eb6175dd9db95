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

// cos / sin of the VEC angles position · inv_freq[i0 + j]: the angle in fp32 (as Hugging Face),
// its cos / sin in double (as the CPU reference); sin negated for the inverse rotation.
template <int VEC>
__device__ __forceinline__ void token_angles(float (&cs)[VEC], float (&sn)[VEC], float p, const float* inv_freq,
                                             int i0, bool inverse) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const float a = p * inv_freq[i0 + j];
    double s, c;
    sincos(double(a), &s, &c);
    cs[j] = float(c);
    sn[j] = inverse ? -float(s) : float(s);
  }
}

// Rotates the VEC pairs (src[j], src[j + half]) into dst (dst may be src); returns the largest
// |value| stored, as stored (callers that do not want it leave it to dead-code elimination).
template <int VEC, class T>
__device__ __forceinline__ float rotate(T* dst, const T* src, int half, const float (&cs)[VEC],
                                        const float (&sn)[VEC]) {
  float x1[VEC], x2[VEC], y1[VEC], y2[VEC];
  load_vec<VEC>(x1, src);
  load_vec<VEC>(x2, src + half);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    y1[j] = x1[j] * cs[j] - x2[j] * sn[j];
    y2[j] = x2[j] * cs[j] + x1[j] * sn[j];
  }
  store_vec<VEC>(dst, y1);
  store_vec<VEC>(dst + half, y2);
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < VEC; ++j) m = fmaxf(m, fmaxf(stored_abs<T>(y1[j]), stored_abs<T>(y2[j])));
  return m;
}

// Rotates the first H heads of every one of N rows of `row` elements (rope_apply: row = H·D;
// rope_qk_packed: the q and k heads of a fused projection row).
// With amax_bits: also max |value| over the rotated heads and the next Hv heads of each row
// (read only: rope_qk_packed's value heads), reduced into amax_bits.
template <class T, int VEC>
__global__ void rope_kernel(T* x, const int32_t* positions, const float* inv_freq, int64_t N, int H,
                            int half, int64_t row, bool inverse, int Hv, unsigned* amax_bits) {
  const int groups = half / VEC;
  const int64_t total = N * groups;
  float m = 0.0f;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = idx / groups;
    const int i0 = int(idx - n * groups) * VEC;
    float cs[VEC], sn[VEC];
    token_angles<VEC>(cs, sn, float(positions[n]), inv_freq, i0, inverse);
    T* base = x + n * row + i0;
#pragma unroll 4
    for (int h = 0; h < H; ++h) {
      T* v = base + int64_t(h) * (2 * half);
      const float hm = rotate<VEC>(v, v, half, cs, sn);
      if (amax_bits) m = fmaxf(m, hm);
    }
    if (amax_bits)
      for (int h = H; h < H + Hv; ++h) {
        float a[VEC], b[VEC];
        load_vec<VEC>(a, base + int64_t(h) * (2 * half));
        load_vec<VEC>(b, base + int64_t(h) * (2 * half) + half);
#pragma unroll
        for (int j = 0; j < VEC; ++j) m = fmaxf(m, fmaxf(fabsf(a[j]), fabsf(b[j])));
      }
  }
  if (amax_bits) amax_reduce_into(amax_bits, m);  // every thread gets here (grid-stride loop)
}

// Fused-QKV move: one thread per (token, group of VEC frequencies), as rope_kernel, walking
// the token's q and k heads (rotated) and v heads (copied) between the packed row and the
// separate q/k/v tensors. PACK: q/k/v -> packed with the inverse rotation (backward).
template <class T, int VEC, bool PACK>
__global__ void rope_qkv_kernel(T* packed, T* q, T* k, T* v, const int32_t* positions, const float* inv_freq,
                                int64_t N, int Hq, int Hkv, int half) {
  const int groups = half / VEC;
  const int D = 2 * half;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  const int64_t total = N * groups;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = idx / groups;
    const int i0 = int(idx - n * groups) * VEC;
    float cs[VEC], sn[VEC];
    token_angles<VEC>(cs, sn, float(positions[n]), inv_freq, i0, PACK);
    T* prow = packed + n * row + i0;
    for (int h = 0; h < Hq + Hkv; ++h) {
      T* pp = prow + int64_t(h) * D;
      T* u = (h < Hq ? q + (n * Hq + h) * int64_t(D) : k + (n * Hkv + (h - Hq)) * int64_t(D)) + i0;
      rotate<VEC>(PACK ? pp : u, PACK ? u : pp, half, cs, sn);
    }
    for (int h = 0; h < Hkv; ++h) {
      T* pp = prow + int64_t(Hq + Hkv + h) * D;
      T* u = v + (n * Hkv + h) * int64_t(D) + i0;
      const T* src = PACK ? u : pp;
      T* dst = PACK ? pp : u;
      float x1[VEC], x2[VEC];
      load_vec<VEC>(x1, src);
      load_vec<VEC>(x2, src + half);
      store_vec<VEC>(dst, x1);
      store_vec<VEC>(dst + half, x2);
    }
  }
}

}  // namespace

namespace {

// Launches rope_kernel over N rows of `row` elements of x (H heads rotated), with the widest
// vector access D/2 and the alignment of x and row allow.
void launch_rope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq, int64_t N, int64_t H,
                 int64_t half, int64_t row, bool inverse, const char* op, int64_t Hv = 0,
                 const Tensor& amax = Tensor()) {
  unsigned* amax_bits = amax_accumulator(amax, op);  // zeroed: 0 when there is nothing to scan
  if (N == 0 || (H == 0 && Hv == 0) || half == 0) return;
  dispatch_float(x.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    T* p = static_cast<T*>(x.raw());
    auto fits = [&](int64_t vec) {
      return half % vec == 0 && row % vec == 0 && reinterpret_cast<uintptr_t>(p) % (vec * sizeof(T)) == 0;
    };
    auto go = [&](auto vec_c) {
      constexpr int VEC = decltype(vec_c)::value;
      const int64_t total = N * (half / VEC);
      rope_kernel<T, VEC><<<grid_for(total, 256, sm_waves(16)), 256, 0, cuda_ctx::stream()>>>(
          p, positions.i32(), inv_freq.f32(), N, int(H), int(half), row, inverse, int(Hv), amax_bits);
      BIOFM_CUDA_LAUNCH_CHECK();
    };
    if (fits(4))
      go(std::integral_constant<int, 4>{});
    else if (fits(2))
      go(std::integral_constant<int, 2>{});
    else
      go(std::integral_constant<int, 1>{});
  });
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
  launch_rope(x, positions, inv_freq, N, H, half, H * D, inverse, op);
}

void rope_qk_packed(Tensor& qkv, const Tensor& positions, const Tensor& inv_freq, int64_t hq, int64_t hkv,
                    bool inverse, const Tensor& amax) {
  const char* op = "rope_qk_packed";
  require_float(qkv, op, "qkv");
  require_dtype(positions, DType::I32, op, "positions");
  require_dtype(inv_freq, DType::F32, op, "inv_freq");
  if (hq < 0 || hkv < 0 || inv_freq.dim() != 1) fail(op, ": bad head counts or inv_freq ", inv_freq.describe());
  const int64_t half = inv_freq.numel(), row = (hq + 2 * hkv) * 2 * half;
  const int64_t N = row ? rows_of(qkv, row, op, "qkv") : 0;
  require_shape(positions, {N}, op, "positions");
  launch_rope(qkv, positions, inv_freq, N, hq + hkv, half, row, inverse, op, hkv, amax);
}

namespace {

template <bool PACK>
void move_qkv(const Tensor& packed, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions,
              const Tensor& inv_freq, const char* op) {
  require_float(packed, op, "packed");
  for (const Tensor* t : {&q, &k, &v}) require_float(*t, op, "q/k/v");
  require_dtype(positions, DType::I32, op, "positions");
  require_dtype(inv_freq, DType::F32, op, "inv_freq");
  if (q.dim() != 3 || k.dim() != 3 || k.shape() != v.shape() || q.size(0) != k.size(0) || q.size(2) != k.size(2) ||
      q.dtype() != packed.dtype() || k.dtype() != packed.dtype() || v.dtype() != packed.dtype())
    fail(op, ": q [N,Hq,D], k and v [N,Hkv,D] of packed's dtype expected, got ", q.describe(), ", ",
         k.describe(), ", ", v.describe());
  const int64_t N = q.size(0), Hq = q.size(1), Hkv = k.size(1), D = q.size(2);
  if (D % 2 != 0) fail(op, ": head dimension must be even, got ", q.describe());
  const int64_t row = (Hq + 2 * Hkv) * D, half = D / 2;
  if (rows_of(packed, row, op, "packed") != N)
    fail(op, ": packed ", packed.describe(), " must be [", N, ", ", row, "]");
  require_shape(positions, {N}, op, "positions");
  require_shape(inv_freq, {half}, op, "inv_freq");
  if (N == 0 || half == 0) return;
  dispatch_float(packed.dtype(), op, [&](auto tt) {
    using T = typename decltype(tt)::type;
    T* pp = static_cast<T*>(packed.raw());
    T* qp = static_cast<T*>(q.raw());
    T* kp = static_cast<T*>(k.raw());
    T* vp = static_cast<T*>(v.raw());
    auto all_aligned = [&](size_t bytes) {
      for (const void* ptr : {(const void*)pp, (const void*)qp, (const void*)kp, (const void*)vp})
        if (reinterpret_cast<uintptr_t>(ptr) % bytes != 0) return false;
      return true;
    };
    auto go = [&](auto vec_c) {
      constexpr int VEC = decltype(vec_c)::value;
      const int64_t total = N * (half / VEC);
      rope_qkv_kernel<T, VEC, PACK><<<grid_for(total, 256, sm_waves(16)), 256, 0, cuda_ctx::stream()>>>(
          pp, qp, kp, vp, positions.i32(), inv_freq.f32(), N, int(Hq), int(Hkv), int(half));
      BIOFM_CUDA_LAUNCH_CHECK();
    };
    if (half % 4 == 0 && all_aligned(4 * sizeof(T)))
      go(std::integral_constant<int, 4>{});
    else if (half % 2 == 0 && all_aligned(2 * sizeof(T)))
      go(std::integral_constant<int, 2>{});
    else
      go(std::integral_constant<int, 1>{});
  });
}

}  // namespace

void rope_unpack_qkv(Tensor& q, Tensor& k, Tensor& v, const Tensor& packed, const Tensor& positions,
                     const Tensor& inv_freq) {
  move_qkv<false>(packed, q, k, v, positions, inv_freq, "rope_unpack_qkv");
}

void rope_pack_qkv_grad(Tensor& dpacked, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        const Tensor& positions, const Tensor& inv_freq) {
  move_qkv<true>(dpacked, dq, dk, dv, positions, inv_freq, "rope_pack_qkv_grad");
}

}  // namespace biofm::ops::cuda
