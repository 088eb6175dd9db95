#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/rope/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

namespace {

Tensor inv_freq_for(int64_t D, double theta = 10000.0) {
  std::vector<float> f(size_t(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) f[size_t(i)] = float(std::pow(theta, -2.0 * i / double(D)));
  return Tensor::from_f32({D / 2}, f);
}

double row_norm(const float* v, int64_t D) {
  double s = 0;
  for (int64_t i = 0; i < D; ++i) s += double(v[i]) * v[i];
  return std::sqrt(s);
}

}  // namespace

TEST(OpsRope, PositionZeroIsIdentityAndNormsPreserved) {
  const int64_t N = 4, H = 3, D = 8;
  Tensor x = randn({N, H, D}, 1);
  Tensor pos = Tensor::from_i32({N}, {0, 1, 5, 1000});
  Tensor f = inv_freq_for(D);
  Tensor y = x.clone();
  ops::rope_apply(y, pos, f, false);
  for (int64_t i = 0; i < H * D; ++i) EXPECT_EQ(y.f32()[i], x.f32()[i]);  // row 0: position 0
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      EXPECT_NEAR(row_norm(y.f32() + (n * H + h) * D, D), row_norm(x.f32() + (n * H + h) * D, D),
                  1e-5);
}

TEST(OpsRope, MatchesFormulaAndInverseUndoes) {
  const int64_t N = 3, H = 2, D = 6;
  Tensor x = randn({N, H, D}, 2);
  Tensor pos = Tensor::from_i32({N}, {3, 0, 17});
  Tensor f = inv_freq_for(D, 500000.0);
  Tensor y = x.clone();
  ops::rope_apply(y, pos, f, false);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const float* xv = x.f32() + (n * H + h) * D;
        const float* yv = y.f32() + (n * H + h) * D;
        const double a = double(float(pos.i32()[n]) * f.f32()[i]);
        EXPECT_NEAR(yv[i], xv[i] * std::cos(a) - xv[i + D / 2] * std::sin(a), 1e-5);
        EXPECT_NEAR(yv[i + D / 2], xv[i + D / 2] * std::cos(a) + xv[i] * std::sin(a), 1e-5);
      }
  ops::rope_apply(y, pos, f, true);
  EXPECT_TRUE(tensors_close(y, x, 1e-5));
}

TEST(OpsRope, GradFDInverseIsTranspose) {
  const int64_t N = 5, H = 2, D = 8;
  Tensor x = randn({N, H, D}, 3), R = randn({N, H, D}, 4);
  Tensor pos = Tensor::from_i32({N}, {0, 1, 2, 7, 30});
  Tensor f = inv_freq_for(D);
  Tensor y = Tensor::empty({N, H, D}, DType::F32);
  auto objective = [&] {
    y.copy_from(x);
    ops::rope_apply(y, pos, f, false);
    return dot(y, R);
  };
  Tensor dx = R.clone();
  ops::rope_apply(dx, pos, f, true);
  EXPECT_TRUE(fd_check("dx", objective, x, dx));
}

TEST(OpsRope, BadShapesThrow) {
  Tensor x = randn({4, 2, 8}, 1);
  Tensor pos = Tensor::from_i32({4}, {0, 1, 2, 3}), pos3 = Tensor::from_i32({3}, {0, 1, 2});
  Tensor f = inv_freq_for(8), f3 = inv_freq_for(6);
  EXPECT_THROW(ops::rope_apply(x, pos3, f, false), Error);
  EXPECT_THROW(ops::rope_apply(x, pos, f3, false), Error);
  Tensor odd = randn({4, 2, 7}, 2);
  EXPECT_THROW(ops::rope_apply(odd, pos, f, false), Error);
  Tensor flat = randn({4, 16}, 3);
  EXPECT_THROW(ops::rope_apply(flat, pos, f, false), Error);
}

// The fused-QKV split: unpacking a packed row equals slicing it and rotating q and k with
// rope_apply; packing the gradients applies the inverse rotation, so pack ∘ unpack = identity
// (rotations are orthogonal). GQA shape: 4 query heads, 2 key/value heads.
TEST(OpsRope, UnpackQkvMatchesSliceAndRotateAndPackInvertsIt) {
  const int64_t N = 5, Hq = 4, Hkv = 2, D = 8, R = (Hq + 2 * Hkv) * D;
  Tensor packed = randn({N, R}, 7);
  Tensor pos = Tensor::from_i32({N}, {0, 3, 1, 0, 17});
  Tensor f = inv_freq_for(D);
  Tensor q = Tensor::empty({N, Hq, D}, DType::F32), k = Tensor::empty({N, Hkv, D}, DType::F32), v = Tensor::empty({N, Hkv, D}, DType::F32);
  ops::rope_unpack_qkv(q, k, v, packed, pos, f);

  Tensor qr = Tensor::empty({N, Hq, D}, DType::F32), kr = Tensor::empty({N, Hkv, D}, DType::F32), vr = Tensor::empty({N, Hkv, D}, DType::F32);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = packed.f32() + n * R;
    std::copy(row, row + Hq * D, qr.f32() + n * Hq * D);
    std::copy(row + Hq * D, row + (Hq + Hkv) * D, kr.f32() + n * Hkv * D);
    std::copy(row + (Hq + Hkv) * D, row + R, vr.f32() + n * Hkv * D);
  }
  ops::rope_apply(qr, pos, f, false);
  ops::rope_apply(kr, pos, f, false);
  EXPECT_TRUE(tensors_close(q, qr, 0, 0));
  EXPECT_TRUE(tensors_close(k, kr, 0, 0));
  EXPECT_TRUE(tensors_close(v, vr, 0, 0));

  Tensor back = Tensor::empty({N, R}, DType::F32);
  ops::rope_pack_qkv_grad(back, q, k, v, pos, f);
  EXPECT_TRUE(tensors_close(back, packed, 1e-5, 1e-5));
  Tensor bad = Tensor::empty({N, R - D}, DType::F32);
  EXPECT_THROW(ops::rope_pack_qkv_grad(bad, q, k, v, pos, f), Error);
}

// rope_qk_packed's amax: max |value| over whole rows after the rotation, value heads included
// (the largest value is put in a value head, which the rotation leaves alone).
TEST(OpsRope, PackedAmaxCoversValueHeads) {
  const int64_t N = 3, Hq = 2, Hkv = 1, D = 8, R = (Hq + 2 * Hkv) * D;
  Tensor qkv = randn({N, R}, 8);
  qkv.f32()[2 * R + (Hq + Hkv) * D + 3] = -9.0f;  // a value head
  Tensor pos = Tensor::from_i32({N}, {0, 5, 2});
  Tensor amax = Tensor::empty({1}, DType::F32);
  ops::rope_qk_packed(qkv, pos, inv_freq_for(D), Hq, Hkv, /*inverse=*/true, amax);
  EXPECT_EQ(amax.f32()[0], 9.0f);
  EXPECT_EQ(amax.f32()[0], float(max_abs(qkv)));
}
