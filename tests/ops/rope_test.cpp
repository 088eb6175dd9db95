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
