// CUDA fused softmax cross-entropy against the CPU reference (label "cuda": GPU machine only).
#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/loss/op.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

// Labels in [0, V) with about a third set to -100.
std::vector<int32_t> make_labels(int64_t N, int64_t V, uint64_t seed) {
  std::vector<int32_t> lab = rand_ints(N, seed, 0, int32_t(V));
  const std::vector<int32_t> r = rand_ints(N, seed + 1, 0, 3);
  for (int64_t i = 0; i < N; ++i)
    if (r[size_t(i)] == 0) lab[size_t(i)] = ops::kIgnoreIndex;
  if (N > 0 && lab[0] == ops::kIgnoreIndex) lab[0] = 0;  // at least one real label
  return lab;
}

}  // namespace

TEST(CudaLoss, CrossEntropyMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  struct Case {
    int64_t N, V;
    float scale;  // logit spread
  };
  // V = 33 (ESM), 256 (nucleotides), 32000 (Llama text); 2049 (block per row, unvectorised),
  // 40000 (512-thread rows); large logits for the online max.
  const std::vector<Case> cases = {{1, 33, 2.0f},     {37, 33, 2.0f},   {4096, 33, 3.0f},
                                   {4096, 256, 2.0f}, {37, 256, 30.0f}, {257, 32000, 2.0f},
                                   {19, 2049, 4.0f},  {7, 40000, 2.0f}, {37, 7, 1.0f}};
  uint64_t seed = 10;
  for (const auto& c : cases) {
    for (DType dt : {DType::F32, DType::BF16}) {
      seed += 5;
      Tensor logits0 = round_to(randn({c.N, c.V}, seed, c.scale), dt);
      std::vector<int32_t> lab = make_labels(c.N, c.V, seed + 1);
      Tensor labels_h = Tensor::from_i32({c.N}, lab);
      int64_t n_label = 0;
      for (int32_t y : lab) n_label += y != ops::kIgnoreIndex;
      const float grad_scale = 1.0f / float(n_label);
      Tensor loss_ref = Tensor::empty({c.N}, DType::F32),
             dl_ref = Tensor::empty({c.N, c.V}, DType::F32);
      ops::cpu::cross_entropy_forward_backward(loss_ref, dl_ref, logits0, labels_h, grad_scale);
      const std::string L = std::string("cross_entropy ") + dtname(dt) +
                            " N=" + std::to_string(c.N) + " V=" + std::to_string(c.V);

      Tensor logits = to_device(logits0, dt), labels = labels_h.to(Device::CUDA);
      Tensor loss = Tensor::empty({c.N}, DType::F32, Device::CUDA);
      Tensor none;
      // Loss only.
      poison(loss);
      ops::cuda::cross_entropy_forward_backward(loss, none, logits, labels, grad_scale);
      EXPECT_TRUE(close(L + " loss (forward only)", to_host_f32(loss), loss_ref, 1e-5));
      // Loss and gradient into a separate tensor of the logits' dtype, and into an F32 one.
      for (DType gdt : {dt, DType::F32}) {
        Tensor dl = Tensor::empty({c.N, c.V}, gdt, Device::CUDA);
        poison(loss);
        poison(dl);
        ops::cuda::cross_entropy_forward_backward(loss, dl, logits, labels, grad_scale);
        EXPECT_TRUE(close(L + " loss", to_host_f32(loss), loss_ref, 1e-5));
        EXPECT_TRUE(close(L + " dlogits " + dtname(gdt), to_host_f32(dl), dl_ref, tol(gdt)));
      }
      // Gradient only, in place over the logits.
      ops::cuda::cross_entropy_forward_backward(none, logits, logits, labels, grad_scale);
      EXPECT_TRUE(close(L + " dlogits in place", to_host_f32(logits), dl_ref, tol(dt)));
    }
  }
}

TEST(CudaLoss, AllIgnoredAndBadLabels) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 4, V = 33;
  Tensor logits0 = randn({N, V}, 3);
  Tensor logits = to_device(logits0, DType::F32);
  Tensor loss = Tensor::empty({N}, DType::F32, Device::CUDA);
  Tensor dl = Tensor::empty({N, V}, DType::F32, Device::CUDA);
  poison(loss);
  poison(dl);
  ops::cuda::cross_entropy_forward_backward(loss, dl, logits,
                                            to_device_i32({N}, {-100, -100, -100, -100}), 1.0f);
  Tensor lh = to_host_f32(loss), dh = to_host_f32(dl);
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(lh.f32()[i], 0.0f);
  for (int64_t i = 0; i < N * V; ++i) EXPECT_EQ(dh.f32()[i], 0.0f);
  // A label outside [0, V) cannot throw on the GPU: its row comes out NaN, the others right.
  ops::cuda::cross_entropy_forward_backward(loss, dl, logits, to_device_i32({N}, {3, 33, -100, -5}),
                                            1.0f);
  lh = to_host_f32(loss);
  dh = to_host_f32(dl);
  EXPECT_TRUE(std::isfinite(lh.f32()[0]) && lh.f32()[0] > 0.0f);
  EXPECT_TRUE(std::isnan(lh.f32()[1]));
  EXPECT_EQ(lh.f32()[2], 0.0f);
  EXPECT_TRUE(std::isnan(lh.f32()[3]));
  for (int64_t j = 0; j < V; ++j) {
    EXPECT_TRUE(std::isfinite(dh.f32()[j]));
    EXPECT_TRUE(std::isnan(dh.f32()[V + j]));
    EXPECT_EQ(dh.f32()[2 * V + j], 0.0f);
  }
}
