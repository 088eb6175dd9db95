#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/loss/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

TEST(OpsLoss, CrossEntropyHandValues) {
  Tensor logits = Tensor::from_f32({3, 3}, {1, 2, 3, 0, 0, 0, 5, -5, 0});
  Tensor labels = Tensor::from_i32({3}, {2, -100, 0});
  Tensor loss = Tensor::empty({3}, DType::F32), dl = Tensor::empty({3, 3}, DType::F32);
  ops::cross_entropy_forward_backward(loss, dl, logits, labels, 0.5f);
  const double z0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(loss.f32()[0], std::log(z0) - 3.0, 1e-6);  // 0.40760596…
  EXPECT_NEAR(loss.f32()[0], 0.4076059644, 1e-6);
  EXPECT_EQ(loss.f32()[1], 0.0f);
  const double z2 = std::exp(5.0) + std::exp(-5.0) + 1.0;
  EXPECT_NEAR(loss.f32()[2], std::log(z2) - 5.0, 1e-6);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(dl.f32()[j], 0.5 * (std::exp(1.0 + j) / z0 - (j == 2)), 1e-6);
    EXPECT_EQ(dl.f32()[3 + j], 0.0f);
  }
  EXPECT_NEAR(dl.f32()[6], 0.5 * (std::exp(5.0) / z2 - 1), 1e-6);
}

TEST(OpsLoss, CrossEntropyGradFDWithIgnoredLabels) {
  const int64_t N = 8, V = 6;
  Tensor logits = randn({N, V}, 1, 2.0f);
  Tensor labels = Tensor::from_i32({N}, {0, -100, 5, 3, -100, 2, 2, 1});
  Tensor loss = Tensor::empty({N}, DType::F32);
  Tensor none;
  auto objective = [&] {
    ops::cross_entropy_forward_backward(loss, none, logits, labels, 1.0f);
    return sum(loss);
  };
  Tensor dl = Tensor::empty({N, V}, DType::F32);
  ops::cross_entropy_forward_backward(loss, dl, logits, labels, 1.0f);
  EXPECT_TRUE(fd_check("dlogits", objective, logits, dl));
  for (int64_t j = 0; j < V; ++j) EXPECT_EQ(dl.f32()[1 * V + j], 0.0f);
}

TEST(OpsLoss, CrossEntropyInPlaceAndStable) {
  Tensor logits = Tensor::from_f32({2, 4}, {1000, -1000, 999, 0, -3000, -3001, -2999, -3000});
  Tensor labels = Tensor::from_i32({2}, {2, 1});
  Tensor loss = Tensor::empty({2}, DType::F32), dl = Tensor::empty({2, 4}, DType::F32);
  ops::cross_entropy_forward_backward(loss, dl, logits, labels, 1.0f);
  EXPECT_NEAR(loss.f32()[0], std::log(1 + std::exp(-1.0)) + 1.0, 1e-5);
  const double z1 = std::exp(-1.0) + std::exp(-2.0) + 1.0 + std::exp(-1.0);
  EXPECT_NEAR(loss.f32()[1], std::log(z1) + 2.0, 1e-5);
  for (int64_t i = 0; i < 8; ++i) EXPECT_TRUE(std::isfinite(dl.f32()[i]));
  // dlogits aliasing logits gives the same result.
  Tensor inplace = logits.clone();
  Tensor loss2 = Tensor::empty({2}, DType::F32);
  ops::cross_entropy_forward_backward(loss2, inplace, inplace, labels, 1.0f);
  EXPECT_TRUE(tensors_close(inplace, dl, 0.0));
  EXPECT_TRUE(tensors_close(loss2, loss, 0.0));
}

TEST(OpsLoss, LabelOutOfRangeThrows) {
  Tensor logits = randn({3, 5}, 1);
  Tensor loss = Tensor::empty({3}, DType::F32), dl = Tensor::empty({3, 5}, DType::F32);
  Tensor big = Tensor::from_i32({3}, {0, 5, 1}), neg = Tensor::from_i32({3}, {0, -1, 1});
  EXPECT_THROW(ops::cross_entropy_forward_backward(loss, dl, logits, big, 1.0f), Error);
  EXPECT_THROW(ops::cross_entropy_forward_backward(loss, dl, logits, neg, 1.0f), Error);
  // Nothing written when the labels are rejected, even in place.
  Tensor lg = logits.clone();
  EXPECT_THROW(ops::cross_entropy_forward_backward(loss, lg, lg, big, 1.0f), Error);
  EXPECT_TRUE(tensors_close(lg, logits, 0.0));
  Tensor ok = Tensor::from_i32({3}, {0, 4, -100});
  Tensor loss_bad = Tensor::empty({4}, DType::F32), labels_bad = Tensor::from_i32({2}, {0, 1});
  EXPECT_THROW(ops::cross_entropy_forward_backward(loss_bad, dl, logits, ok, 1.0f), Error);
  EXPECT_THROW(ops::cross_entropy_forward_backward(loss, dl, logits, labels_bad, 1.0f), Error);
  Tensor dl_bad = Tensor::empty({3, 4}, DType::F32);
  EXPECT_THROW(ops::cross_entropy_forward_backward(loss, dl_bad, logits, ok, 1.0f), Error);
}

TEST(OpsLoss, CountLabelsAccumulate) {
  Tensor labels = Tensor::from_i32({6}, {3, -100, 0, 7, -100, 1});
  Tensor count = Tensor::from_f32({1}, {2.0f});
  ops::count_labels_accumulate(count, labels);
  EXPECT_EQ(count.f32()[0], 6.0f);
  Tensor wrong = Tensor::zeros({2}, DType::F32);
  EXPECT_THROW(ops::count_labels_accumulate(wrong, labels), Error);
}
