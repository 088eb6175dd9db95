// The vectorised helpers behind the CPU ops (exp, erf-based GELU, sigmoid) against libm.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "biofm/ops/cpu_util.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::ops::cpu_detail;

TEST(OpsKernels, ExpAccuracy) {
  std::vector<float> x;
  for (double v = -87.0; v <= 88.0; v += 0.00731) x.push_back(float(v));
  std::vector<float> y = x;
  exp_shift(y.data(), int64_t(y.size()), 0.0f);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = std::exp(double(x[i]));
    worst = std::max(worst, std::fabs(y[i] - r) / r);
    ASSERT_NEAR(exp_simd(x[i]), y[i], 0.0);  // the scalar and vector paths agree
  }
  EXPECT_LT(worst, 3e-7);
  // Far outside the range: clamped, finite, never NaN.
  EXPECT_GT(exp_simd(-1e4f), 0.0f);
  EXPECT_LT(exp_simd(-1e4f), 1e-37f);
  EXPECT_TRUE(std::isfinite(exp_simd(1e4f)));
  EXPECT_EQ(exp_simd(0.0f), 1.0f);
}

TEST(OpsKernels, ExpShiftSumAndMax) {
  std::vector<float> x = {0.5f, -3.0f, 2.0f, 1.0f, -0.25f, 7.0f, 6.5f};
  EXPECT_EQ(max_of(x.data(), int64_t(x.size())), 7.0f);
  std::vector<float> y = x;
  const float s = exp_shift_sum(y.data(), int64_t(y.size()), 7.0f);
  double ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = std::exp(double(x[i]) - 7.0);
    ref += e;
    EXPECT_NEAR(y[i], e, 1e-7);
  }
  EXPECT_NEAR(s, ref, 1e-6);
}

TEST(OpsKernels, GeluAndSiluMatchLibm) {
  std::vector<float> x;
  for (double v = -12.0; v <= 12.0; v += 0.0013) x.push_back(float(v));
  const int64_t n = int64_t(x.size());
  std::vector<float> ye(x.size()), yt(x.size()), ge(x.size()), gt(x.size()), ones(x.size(), 1.0f),
      sw(x.size());
  gelu_rows(ye.data(), x.data(), n, false);
  gelu_rows(yt.data(), x.data(), n, true);
  gelu_grad_rows(ge.data(), ones.data(), x.data(), n, false);
  gelu_grad_rows(gt.data(), ones.data(), x.data(), n, true);
  swiglu_rows(sw.data(), x.data(), ones.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double phi = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    const double k = std::sqrt(2.0 / M_PI), u = k * (v + 0.044715 * v * v * v), t = std::tanh(u);
    const double tol = 1e-6 * (1 + std::fabs(v));
    ASSERT_NEAR(ye[i], v * phi, tol) << v;
    ASSERT_NEAR(yt[i], 0.5 * v * (1 + t), tol) << v;
    ASSERT_NEAR(ge[i], phi + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI), tol) << v;
    ASSERT_NEAR(gt[i], 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v), tol)
        << v;
    ASSERT_NEAR(sw[i], v / (1 + std::exp(-v)), tol) << v;
  }
}
