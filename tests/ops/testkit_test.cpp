// The finite-difference checker in tests/testing.h must catch wrong gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

TEST(OpsTestkit, FdCheckAcceptsRightAndRejectsWrongGradients) {
  // L = Σ R·sin(x): dL/dx = R·cos(x).
  Tensor x = randn({40}, 1), R = randn({40}, 2);
  auto objective = [&] {
    double s = 0;
    for (int64_t i = 0; i < 40; ++i) s += double(R.f32()[i]) * std::sin(x.f32()[i]);
    return s;
  };
  Tensor g = Tensor::empty({40}, DType::F32);
  for (int64_t i = 0; i < 40; ++i) g.f32()[i] = R.f32()[i] * std::cos(x.f32()[i]);
  EXPECT_TRUE(fd_check("right", objective, x, g));
  Tensor x0 = x.clone();
  EXPECT_TRUE(tensors_close(x, x0, 0.0));  // perturbations are undone
  Tensor off = g.clone();
  off.f32()[7] *= 1.05f;  // one element 5% off
  EXPECT_FALSE(fd_check("one wrong", objective, x, off));
  Tensor scaled = g.clone();
  for (int64_t i = 0; i < 40; ++i) scaled.f32()[i] *= 1.03f;
  EXPECT_FALSE(fd_check("all 3% off", objective, x, scaled));
  Tensor wrong_size = Tensor::empty({39}, DType::F32);
  EXPECT_FALSE(fd_check("size", objective, x, wrong_size));
}
