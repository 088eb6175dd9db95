// Rotary position embedding (rotate-half form), CPU.
#include <cmath>
#include <vector>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/rope/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {
// cos / sin of position · inv_freq[i], i < half; the angle is formed in fp32 as Hugging Face
// does, then cos / sin in double. sgn = -1 gives the inverse rotation.
void token_angles(float* cs, float* sn, int32_t pos, const float* inv_freq, int64_t half, float sgn) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = float(pos) * inv_freq[i];
    cs[i] = float(std::cos(double(a)));
    sn[i] = sgn * float(std::sin(double(a)));
  }
}
}  // namespace

namespace {

// Rotates the first H heads of each of N rows of `row` floats (heads of D, back to back).
void rotate_rows(float* xp, int64_t N, int64_t H, int64_t D, int64_t row, const int32_t* pos, const float* f,
                 float sgn) {
  const int64_t half = D / 2;
#pragma omp parallel num_threads(threads_for(N * H * D))
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      token_angles(cs.data(), sn.data(), pos[n], f, half, sgn);
      for (int64_t h = 0; h < H; ++h) {
        float* v = xp + n * row + h * D;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * cs[size_t(i)] - x2 * sn[size_t(i)];
          v[i + half] = x2 * cs[size_t(i)] + x1 * sn[size_t(i)];
        }
      }
    }
  }
}

}  // namespace

void rope_apply(Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse) {
  const char* op = "rope_apply";
  require_f32(x, op, "x");
  require_i32(positions, op, "positions");
  require_f32(inv_freq, op, "inv_freq");
  if (x.dim() != 3) fail(op, ": x must be [N, H, D], got ", x.describe());
  const int64_t N = x.size(0), H = x.size(1), D = x.size(2);
  if (D % 2 != 0) fail(op, ": head dimension must be even, got ", x.describe());
  check_shape(positions, {N}, "rope_apply: positions");
  check_shape(inv_freq, {D / 2}, "rope_apply: inv_freq");
  rotate_rows(x.f32(), N, H, D, H * D, positions.i32(), inv_freq.f32(), inverse ? -1.0f : 1.0f);
}

void rope_qk_packed(Tensor& qkv, const Tensor& positions, const Tensor& inv_freq, int64_t hq, int64_t hkv,
                    bool inverse, const Tensor& amax) {
  const char* op = "rope_qk_packed";
  require_f32(qkv, op, "qkv");
  require_i32(positions, op, "positions");
  require_f32(inv_freq, op, "inv_freq");
  const int64_t D = 2 * inv_freq.numel(), row = (hq + 2 * hkv) * D;
  if (hq < 0 || hkv < 0 || inv_freq.dim() != 1) fail(op, ": bad head counts or inv_freq ", inv_freq.describe());
  const int64_t N = row ? rows_of(qkv, row, op, "qkv") : 0;
  check_shape(positions, {N}, "rope_qk_packed: positions");
  if (amax.defined()) require_f32_shape(amax, {1}, op, "amax");
  if (N > 0 && D > 0)
    rotate_rows(qkv.f32(), N, hq + hkv, D, row, positions.i32(), inv_freq.f32(), inverse ? -1.0f : 1.0f);
  if (amax.defined()) write_amax(amax, qkv, op);
}

namespace {

struct QkvDims {
  int64_t N, Hq, Hkv, D;
  int64_t row() const { return (Hq + 2 * Hkv) * D; }
};

QkvDims check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& packed,
                  const Tensor& positions, const Tensor& inv_freq, const char* op) {
  for (const Tensor* t : {&q, &k, &v}) require_f32(*t, op, "q/k/v");
  require_f32(packed, op, "packed");
  require_i32(positions, op, "positions");
  require_f32(inv_freq, op, "inv_freq");
  if (q.dim() != 3 || k.dim() != 3 || k.shape() != v.shape() || q.size(0) != k.size(0) || q.size(2) != k.size(2))
    fail(op, ": q [N,Hq,D], k and v [N,Hkv,D] expected, got ", q.describe(), ", ", k.describe(), ", ",
         v.describe());
  QkvDims d{q.size(0), q.size(1), k.size(1), q.size(2)};
  if (d.D % 2 != 0) fail(op, ": head dimension must be even, got ", q.describe());
  if (rows_of(packed, d.row(), op, "packed") != d.N)
    fail(op, ": packed ", packed.describe(), " must be [", d.N, ", ", d.row(), "]");
  check_shape(positions, {d.N}, op);
  check_shape(inv_freq, {d.D / 2}, op);
  return d;
}

// Moves one token between the packed row and q/k/v: rotating q and k heads (by +angle to
// unpack, -angle to pack the gradient) and copying v heads.
void move_token(float* row, float* q, float* k, float* v, const QkvDims& d, const float* cs, const float* sn,
                bool pack) {
  const int64_t half = d.D / 2;
  for (int64_t h = 0; h < d.Hq + d.Hkv; ++h) {
    float* p = row + h * d.D;
    float* u = h < d.Hq ? q + h * d.D : k + (h - d.Hq) * d.D;
    const float* src = pack ? u : p;
    float* dst = pack ? p : u;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = src[i], x2 = src[i + half];
      dst[i] = x1 * cs[i] - x2 * sn[i];
      dst[i + half] = x2 * cs[i] + x1 * sn[i];
    }
  }
  float* pv = row + (d.Hq + d.Hkv) * d.D;
  for (int64_t i = 0; i < d.Hkv * d.D; ++i) {
    if (pack)
      pv[i] = v[i];
    else
      v[i] = pv[i];
  }
}

void move_qkv(const Tensor& packed, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions,
              const Tensor& inv_freq, bool pack, const char* op) {
  const QkvDims d = check_qkv(q, k, v, packed, positions, inv_freq, op);
  const int64_t half = d.D / 2;
  const int32_t* pos = positions.i32();
  const float* f = inv_freq.f32();
  const float sgn = pack ? -1.0f : 1.0f;
#pragma omp parallel num_threads(threads_for(d.N * d.row()))
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < d.N; ++n) {
      token_angles(cs.data(), sn.data(), pos[n], f, half, sgn);
      move_token(packed.f32() + n * d.row(), q.f32() + n * d.Hq * d.D, k.f32() + n * d.Hkv * d.D,
                 v.f32() + n * d.Hkv * d.D, d, cs.data(), sn.data(), pack);
    }
  }
}

}  // namespace

void rope_unpack_qkv(Tensor& q, Tensor& k, Tensor& v, const Tensor& packed, const Tensor& positions,
                     const Tensor& inv_freq) {
  move_qkv(packed, q, k, v, positions, inv_freq, false, "rope_unpack_qkv");
}

void rope_pack_qkv_grad(Tensor& dpacked, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        const Tensor& positions, const Tensor& inv_freq) {
  move_qkv(dpacked, dq, dk, dv, positions, inv_freq, true, "rope_pack_qkv_grad");
}

}  // namespace biofm::ops::cpu
