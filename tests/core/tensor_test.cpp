#include <gtest/gtest.h>

#include "biofm/core/rng.h"
#include "biofm/core/tensor.h"

using namespace biofm;

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = t.narrow0(1, 1);
  EXPECT_EQ(row.shape(), (Shape{1, 3}));
  EXPECT_FLOAT_EQ(row.f32()[0], 4.0f);
  row.f32()[0] = 9.0f;
  EXPECT_FLOAT_EQ(t.f32()[3], 9.0f);
  Tensor flat = t.view({-1});
  EXPECT_EQ(flat.numel(), 6);
  Tensor mid = t.flat_slice(2, {2});
  EXPECT_FLOAT_EQ(mid.f32()[1], 9.0f);
  EXPECT_THROW(t.view({4}), Error);
  EXPECT_THROW(t.narrow0(1, 2), Error);
  EXPECT_THROW(t.i32(), Error);
}

TEST(Tensor, Bf16RoundTrip) {
  Tensor t = Tensor::from_f32({4}, {1.0f, -2.5f, 3.14159f, 1e-3f});
  Tensor back = t.to(DType::BF16).to(DType::F32);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(back.f32()[i], t.f32()[i], std::abs(t.f32()[i]) / 128);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // Round to nearest even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and rounds to 1.
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
}

TEST(Rng, CounterBasedAndUniform) {
  EXPECT_EQ(rng_block(7, RngStream::Mask, 123, 4), rng_block(7, RngStream::Mask, 123, 4));
  EXPECT_NE(rng_block(7, RngStream::Mask, 123, 4), rng_block(7, RngStream::Mask, 123, 5));
  EXPECT_NE(rng_block(7, RngStream::Mask, 123, 4), rng_block(8, RngStream::Mask, 123, 4));
  EXPECT_NE(rng_block(7, RngStream::Mask, 123, 4), rng_block(7, RngStream::Shuffle, 123, 4));
  double sum = 0, sum2 = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    float z = rng_normal(1, RngStream::Init, i, 0);
    sum += z;
    sum2 += double(z) * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sum2 / n, 1.0, 0.02);
  int below = 0;
  for (int i = 0; i < n; ++i) below += rng_uniform(3, RngStream::Mask, i, 0) < 0.15f;
  EXPECT_NEAR(double(below) / n, 0.15, 0.01);
}
