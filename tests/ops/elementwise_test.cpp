#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/elementwise/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

TEST(OpsElementwise, AddInplace) {
  Tensor y = randn({70000}, 1), x = randn({70000}, 2);
  Tensor y0 = y.clone();
  ops::add_inplace(y, x);
  for (int64_t i = 0; i < y.numel(); i += 997) EXPECT_FLOAT_EQ(y.f32()[i], y0.f32()[i] + x.f32()[i]);
  Tensor bad = randn({69999}, 3);
  EXPECT_THROW(ops::add_inplace(y, bad), Error);
  EXPECT_THROW(ops::add_inplace(y, y.view({7, 10000})), Error);
}

TEST(OpsElementwise, AddInplaceBf16) {
  Tensor yf = randn({1000}, 4), xf = randn({1000}, 5);
  Tensor y = yf.to(DType::BF16), x = xf.to(DType::BF16);
  ops::add_inplace(y, x);
  for (int64_t i = 0; i < 1000; ++i)
    EXPECT_EQ(y.bf()[i], f32_to_bf16(bf16_to_f32(yf.to(DType::BF16).bf()[i]) +
                                     bf16_to_f32(x.bf()[i])));
  EXPECT_THROW(ops::add_inplace(y, xf), Error);  // dtypes differ
}

TEST(OpsElementwise, CastAndSumAccumulate) {
  Tensor f = randn({70001}, 6);
  Tensor b = Tensor::empty({70001}, DType::BF16);
  ops::cast(b, f);
  for (int64_t i = 0; i < f.numel(); i += 101) EXPECT_EQ(b.bf()[i], f32_to_bf16(f.f32()[i]));
  Tensor back = Tensor::empty({70001}, DType::F32);
  ops::cast(back, b);
  for (int64_t i = 0; i < f.numel(); i += 101) EXPECT_EQ(back.f32()[i], bf16_to_f32(b.bf()[i]));
  Tensor same = Tensor::empty({70001}, DType::F32);
  ops::cast(same, f);
  EXPECT_TRUE(tensors_close(same, f, 0.0));
  Tensor wrong = Tensor::empty({70000}, DType::BF16);
  EXPECT_THROW(ops::cast(wrong, f), Error);
  Tensor acc = Tensor::from_f32({1}, {1.0f});
  ops::sum_accumulate(acc, f);
  const double s = 1.0 + sum(f);
  EXPECT_NEAR(acc.f32()[0], s, 1e-4 * (1 + std::fabs(s)));
  Tensor acc2 = Tensor::zeros({1}, DType::F32);
  ops::sum_accumulate(acc2, b);
  double sb = 0;
  for (int64_t i = 0; i < b.numel(); ++i) sb += bf16_to_f32(b.bf()[i]);
  EXPECT_NEAR(acc2.f32()[0], sb, 1e-4 * (1 + std::fabs(sb)));
}
