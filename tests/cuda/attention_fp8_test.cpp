// FP8 attention (fp8_dpa) on the GPU, cuDNN's FP8 flash attention, against the CPU reference
// (ops/attention/cpu_fp8.cpp) and fp32 attention: the OpenGenome2 7B head shape (head dim 128,
// grouped kv heads, causal, full windows). The CPU reference keeps the probabilities and the
// score gradient in fp32, cuDNN rounds them to E4M3: the budgets below are E4M3's (3 mantissa
// bits), not bf16's. And a tiny DNA Llama with head dim 128 trains with FP8 attention within the
// recipes' 5% of bf16.
#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/attention/op.h"
#include "biofm/ops/fp8/op.h"
#include "cuda_test_util.h"
#include "recipe_curve.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

constexpr int64_t kB = 2, kS = 256, kHq = 4, kHkv = 2, kD = 128, kN = kB * kS;

struct Inputs {
  Tensor q = round_to(randn({kN, kHq, kD}, 11, 1.0f), DType::BF16);
  Tensor k = round_to(randn({kN, kHkv, kD}, 12, 1.0f), DType::BF16);
  Tensor v = round_to(randn({kN, kHkv, kD}, 13, 0.5f), DType::BF16);
  Tensor dout = round_to(randn({kN, kHq, kD}, 14, 1e-3f), DType::BF16);
  Tensor cu = Tensor::from_i32({kB + 1}, {0, int32_t(kS), int32_t(2 * kS)});
  Tensor lens = Tensor::from_i32({kB}, {int32_t(kS), int32_t(kS)});
  ops::AttentionShape shape{1.0f / std::sqrt(float(kD)), /*causal=*/true, int32_t(kS), /*uniform=*/true};
};

Tensor host_u8(const Tensor& dev) {
  cuda_ctx::synchronize();
  return dev.to(Device::CPU);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  const auto* x = static_cast<const uint8_t*>(a.raw());
  const auto* y = static_cast<const uint8_t*>(b.raw());
  for (int64_t i = 0; i < a.numel(); ++i)
    if (x[i] != y[i]) return false;
  return true;
}

}  // namespace

TEST(CudaAttentionFp8, MatchesTheCpuReference) {
  BIOFM_REQUIRE_GPU();
  Inputs in;
  // CPU: the reference, on the same (bf16-rounded) values in F32.
  Tensor cst = Tensor::zeros({ops::kFp8AttentionSlots}, DType::F32);
  Tensor cout = Tensor::empty(in.q.shape(), DType::F32);
  ops::Fp8AttentionSaved csaved;
  ops::attention_forward_fp8(cout, csaved, cst, in.q, in.k, in.v, in.cu, in.lens, in.shape);
  Tensor cdq = Tensor::empty(in.q.shape(), DType::F32), cdk = Tensor::empty(in.k.shape(), DType::F32),
         cdv = Tensor::empty(in.v.shape(), DType::F32);
  ops::attention_backward_fp8(cdq, cdk, cdv, cst, in.dout, csaved, in.cu, in.lens, in.shape, true);
  // fp32 attention, for scale.
  Tensor ref = Tensor::empty(in.q.shape(), DType::F32), lse = Tensor::empty({kN, kHq}, DType::F32);
  ops::attention_forward(ref, lse, in.q, in.k, in.v, in.cu, in.lens, in.shape);

  // GPU.
  Tensor gst = Tensor::zeros({ops::kFp8AttentionSlots}, DType::F32, Device::CUDA);
  Tensor gout = Tensor::empty(in.q.shape(), DType::BF16, Device::CUDA);
  poison(gout);
  ops::Fp8AttentionSaved gsaved;
  const Tensor cu = in.cu.to(Device::CUDA), lens = in.lens.to(Device::CUDA);
  ops::attention_forward_fp8(gout, gsaved, gst, to_device(in.q, DType::BF16), to_device(in.k, DType::BF16),
                             to_device(in.v, DType::BF16), cu, lens, in.shape);
  // The inputs' codes are the CPU's, byte for byte (the same quantization).
  EXPECT_TRUE(same_bytes(host_u8(gsaved.q), csaved.q));
  EXPECT_TRUE(same_bytes(host_u8(gsaved.k), csaved.k));
  EXPECT_TRUE(same_bytes(host_u8(gsaved.v), csaved.v));
  const Tensor out = to_host_f32(gout);
  ASSERT_TRUE(all_finite(out));
  std::printf("forward: GPU vs CPU reference %.4f, vs fp32 %.4f, CPU reference vs fp32 %.4f\n", rel_error(out, cout),
              rel_error(out, ref), rel_error(cout, ref));
  EXPECT_LT(rel_error(out, cout), 0.08);
  EXPECT_LT(rel_error(out, ref), 0.1);

  Tensor gdq = Tensor::empty(in.q.shape(), DType::BF16, Device::CUDA),
         gdk = Tensor::empty(in.k.shape(), DType::BF16, Device::CUDA),
         gdv = Tensor::empty(in.v.shape(), DType::BF16, Device::CUDA);
  poison(gdq), poison(gdk), poison(gdv);
  const Tensor gdout = to_device(in.dout, DType::BF16);
  ops::attention_backward_fp8(gdq, gdk, gdv, gst, gdout, gsaved, cu, lens, in.shape, /*calibrate=*/true);
  const Tensor dq = to_host_f32(gdq), dk = to_host_f32(gdk), dv = to_host_f32(gdv);
  ASSERT_TRUE(all_finite(dq) && all_finite(dk) && all_finite(dv));
  std::printf("backward vs CPU reference: dq %.4f dk %.4f dv %.4f\n", rel_error(dq, cdq), rel_error(dk, cdk),
              rel_error(dv, cdv));
  EXPECT_LT(rel_error(dq, cdq), 0.15);
  EXPECT_LT(rel_error(dk, cdk), 0.15);
  EXPECT_LT(rel_error(dv, cdv), 0.15);
  // The amaxes cuDNN measured (its gradients, before rounding) against the CPU's.
  const Tensor st = to_host_f32(gst);
  for (int64_t slot : {ops::kFa8AmaxDq, ops::kFa8AmaxDk, ops::kFa8AmaxDv})
    EXPECT_NEAR(st.f32()[slot], cst.f32()[slot], 0.1 * cst.f32()[slot]) << "slot " << slot;
  EXPECT_GT(st.f32()[ops::kFa8AmaxDp], 0.0f);

  // The next backward scales from those amaxes without calibrating: the same gradients within
  // rounding.
  Tensor gdq2 = Tensor::empty(in.q.shape(), DType::BF16, Device::CUDA),
         gdk2 = Tensor::empty(in.k.shape(), DType::BF16, Device::CUDA),
         gdv2 = Tensor::empty(in.v.shape(), DType::BF16, Device::CUDA);
  ops::attention_backward_fp8(gdq2, gdk2, gdv2, gst, gdout, gsaved, cu, lens, in.shape, /*calibrate=*/false);
  EXPECT_LT(rel_error(to_host_f32(gdq2), dq), 0.05);
  EXPECT_LT(rel_error(to_host_f32(gdk2), dk), 0.05);
  EXPECT_LT(rel_error(to_host_f32(gdv2), dv), 0.05);
  // cuDNN's amax outputs are this call's (overwritten, not max-folded): an output gradient 8x
  // smaller (the same codes at an 8x smaller scale) gives 8x smaller amaxes, while the scales
  // stay those of the history's larger ones.
  const float amax_dq = to_host_f32(gst).f32()[ops::kFa8AmaxDq], scale_dq = to_host_f32(gst).f32()[ops::kFa8DqScale];
  Tensor small = in.dout.clone();
  for (int64_t i = 0; i < small.numel(); ++i) small.f32()[i] /= 8.0f;
  ops::attention_backward_fp8(gdq2, gdk2, gdv2, gst, to_device(small, DType::BF16), gsaved, cu, lens, in.shape, false);
  const Tensor st3 = to_host_f32(gst);
  EXPECT_NEAR(st3.f32()[ops::kFa8AmaxDq], amax_dq / 8.0f, 0.1 * amax_dq / 8.0f);
  EXPECT_NEAR(st3.f32()[ops::kFa8DqScale], scale_dq, 0.05 * scale_dq);  // not 8x larger
}

TEST(CudaAttentionFp8, RefusesRaggedBatches) {
  BIOFM_REQUIRE_GPU();
  Inputs in;
  ops::AttentionShape ragged = in.shape;
  ragged.uniform = false;
  Tensor st = Tensor::zeros({ops::kFp8AttentionSlots}, DType::F32, Device::CUDA);
  Tensor out = Tensor::empty(in.q.shape(), DType::BF16, Device::CUDA);
  ops::Fp8AttentionSaved saved;
  try {
    ops::attention_forward_fp8(out, saved, st, to_device(in.q, DType::BF16), to_device(in.k, DType::BF16),
                               to_device(in.v, DType::BF16), in.cu.to(Device::CUDA), in.lens.to(Device::CUDA), ragged);
    FAIL() << "a ragged batch was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("uniform batches only"), std::string::npos) << e.what();
  }
}

// A 4-layer DNA Llama with head dim 128 (hidden 256, 2 query heads, 1 kv head) on four 256-token
// windows per step (most batches are all full windows; one with a record's last, shorter window
// runs its attention in bf16): FP8 DelayedScaling with and without FP8 attention against bf16.
TEST(CudaAttentionFp8, TrainingTracksBf16) {
  BIOFM_REQUIRE_GPU();
  using testkit::expect_tracks, testkit::recipe_curve;
  testkit::CurveOptions o;
  o.hidden = 256;
  o.max_seq_length = 256;
  o.tokens_per_batch = 1024;
  ops::LayerQuant q;
  q.format = ops::LayerFormat::Fp8;
  q.scaling = ops::Fp8Scaling::Delayed;
  q.delayed.amax_history_len = 1024;
  const std::vector<double> bf16 = recipe_curve("llama", {}, o);
  expect_tracks("llama hd128 delayed", recipe_curve("llama", std::vector<ops::LayerQuant>(testkit::kRecipeCurveLayers, q), o),
                bf16);
  q.fp8_dpa = true;
  const int64_t before = ops::cuda::attention_fp8_calls();
  expect_tracks("llama hd128 delayed + fp8_dpa",
                recipe_curve("llama", std::vector<ops::LayerQuant>(testkit::kRecipeCurveLayers, q), o), bf16);
  // 200 steps × 4 layers forward calls, most of them in FP8, and none twice (no recompute here).
  EXPECT_GT(ops::cuda::attention_fp8_calls() - before, 400);
  EXPECT_LE(ops::cuda::attention_fp8_calls() - before, 800);
}
