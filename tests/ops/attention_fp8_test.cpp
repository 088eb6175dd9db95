// FP8 attention (fp8_dpa) on the CPU: the scales op.h defines, the codes kept for backward,
// results within E4M3's rounding of fp32 attention, and the delayed scaling of the gradients
// (a calibrating backward and the next one give the same numbers on the same data).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "biofm/ops/attention/op.h"
#include "biofm/ops/fp8/op.h"
#include "testing.h"

using namespace biofm;

namespace {

constexpr int64_t kB = 2, kS = 24, kHq = 4, kHkv = 2, kD = 16, kN = kB * kS;

Tensor randn(const Shape& s, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  Tensor t = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(rng);
  return t;
}

float amax(const Tensor& t) {
  float m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.f32()[i]));
  return m;
}

// max |a - b| over max |b|
double rel_max_err(const Tensor& a, const Tensor& b) {
  double e = 0;
  for (int64_t i = 0; i < a.numel(); ++i) e = std::max(e, double(std::fabs(a.f32()[i] - b.f32()[i])));
  return e / amax(b);
}

struct Fixture {
  Tensor q = randn({kN, kHq, kD}, 1, 1.0f), k = randn({kN, kHkv, kD}, 2, 1.0f), v = randn({kN, kHkv, kD}, 3, 0.5f);
  Tensor dout = randn({kN, kHq, kD}, 4, 1e-3f);
  Tensor cu = Tensor::from_i32({kB + 1}, {0, int32_t(kS), int32_t(2 * kS)});
  Tensor lens = Tensor::from_i32({kB}, {int32_t(kS), int32_t(kS)});
  ops::AttentionShape shape{1.0f / std::sqrt(float(kD)), /*causal=*/true, int32_t(kS), /*uniform=*/true};
};

}  // namespace

TEST(AttentionFp8, ForwardScalesCodesAndResult) {
  Fixture f;
  Tensor state = Tensor::zeros({ops::kFp8AttentionSlots}, DType::F32);
  Tensor out = Tensor::empty(f.q.shape(), DType::F32);
  ops::Fp8AttentionSaved saved;
  ops::attention_forward_fp8(out, saved, state, f.q, f.k, f.v, f.cu, f.lens, f.shape);
  const float* st = state.f32();
  // Current scaling of the inputs: scale_inv = amax / 448.
  EXPECT_FLOAT_EQ(st[ops::kFa8QScaleInv], amax(f.q) / 448.0f);
  EXPECT_FLOAT_EQ(st[ops::kFa8VScaleInv], amax(f.v) / 448.0f);
  EXPECT_FLOAT_EQ(st[ops::kFa8SScale], 448.0f);
  // The output's scale: 448 / (2·amax(v)).
  EXPECT_NEAR(st[ops::kFa8OScale], 448.0f / (2.0f * amax(f.v)), 1e-3f * st[ops::kFa8OScale]);
  // The kept codes read back to what the op returned.
  ASSERT_EQ(saved.out.dtype(), DType::U8);
  Tensor back = Tensor::empty({kN, kHq * kD}, DType::F32);
  ops::fp8_dequantize(back, saved.out.view({kN, kHq * kD}), state.narrow0(ops::kFa8OScaleInv, 1), ops::Fp8Type::E4M3);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.f32()[i], back.f32()[i]) << i;
  // Within E4M3's rounding of fp32 attention (3 mantissa bits: 6% per value at most, in q, k,
  // v and the output, so up to ~12% of the largest output where they add up).
  Tensor ref = Tensor::empty(f.q.shape(), DType::F32), lse = Tensor::empty({kN, kHq}, DType::F32);
  ops::attention_forward(ref, lse, f.q, f.k, f.v, f.cu, f.lens, f.shape);
  const double err = rel_max_err(out, ref);
  EXPECT_LT(err, 0.12);
  EXPECT_GT(err, 0.0) << "nothing was quantized";
}

TEST(AttentionFp8, BackwardDelayedScalesFromTheHistory) {
  Fixture f;
  Tensor state = Tensor::zeros({ops::kFp8AttentionSlots}, DType::F32);
  Tensor out = Tensor::empty(f.q.shape(), DType::F32);
  ops::Fp8AttentionSaved saved;
  ops::attention_forward_fp8(out, saved, state, f.q, f.k, f.v, f.cu, f.lens, f.shape);
  Tensor dq = Tensor::empty(f.q.shape(), DType::F32), dk = Tensor::empty(f.k.shape(), DType::F32),
         dv = Tensor::empty(f.v.shape(), DType::F32);
  ops::attention_backward_fp8(dq, dk, dv, state, f.dout, saved, f.cu, f.lens, f.shape, /*calibrate=*/true);
  const float* st = state.f32();
  // Against fp32 attention's gradients of the same inputs.
  Tensor rq = Tensor::empty(f.q.shape(), DType::F32), rk = Tensor::empty(f.k.shape(), DType::F32),
         rv = Tensor::empty(f.v.shape(), DType::F32), ref = Tensor::empty(f.q.shape(), DType::F32),
         lse = Tensor::empty({kN, kHq}, DType::F32);
  ops::attention_forward(ref, lse, f.q, f.k, f.v, f.cu, f.lens, f.shape);
  ops::attention_backward(rq, rk, rv, f.dout, f.q, f.k, f.v, ref, lse, f.cu, f.lens, f.shape);
  EXPECT_LT(rel_max_err(dq, rq), 0.15);
  EXPECT_LT(rel_max_err(dk, rk), 0.15);
  EXPECT_LT(rel_max_err(dv, rv), 0.15);
  // The amaxes measured, and the scale they gave: 448 / (4·amax).
  EXPECT_NEAR(st[ops::kFa8AmaxDq], amax(rq), 0.15 * amax(rq));
  EXPECT_NEAR(st[ops::kFa8DqScale], 448.0f / (4.0f * st[ops::kFa8AmaxDq]), 1e-3f * st[ops::kFa8DqScale]);
  // The next backward on the same data scales from those amaxes: the same numbers again.
  Tensor dq2 = Tensor::empty(f.q.shape(), DType::F32), dk2 = Tensor::empty(f.k.shape(), DType::F32),
         dv2 = Tensor::empty(f.v.shape(), DType::F32);
  ops::attention_backward_fp8(dq2, dk2, dv2, state, f.dout, saved, f.cu, f.lens, f.shape, /*calibrate=*/false);
  for (int64_t i = 0; i < dq.numel(); ++i) ASSERT_EQ(dq.f32()[i], dq2.f32()[i]) << i;
  for (int64_t i = 0; i < dv.numel(); ++i) ASSERT_EQ(dv.f32()[i], dv2.f32()[i]) << i;
  // The scale follows the largest amax of the history: a backward on gradients 8x smaller keeps
  // the scale the larger ones gave, so their largest values land two binades + 3 below 448.
  Tensor small = f.dout.clone();
  for (int64_t i = 0; i < small.numel(); ++i) small.f32()[i] /= 8.0f;
  const float scale_before = st[ops::kFa8DqScale];
  ops::attention_backward_fp8(dq2, dk2, dv2, state, small, saved, f.cu, f.lens, f.shape, /*calibrate=*/false);
  EXPECT_EQ(st[ops::kFa8DqScale], scale_before);
  EXPECT_NEAR(st[ops::kFa8AmaxDq], amax(rq) / 8.0f, 0.15 * amax(rq) / 8.0f);
  // Without calibration a fresh state has no amaxes: scale 1, and gradients of 1e-3·... lose
  // their small values to E4M3's range, which is what calibration is for.
  Tensor fresh = Tensor::zeros({ops::kFp8AttentionSlots}, DType::F32);
  ops::Fp8AttentionSaved s2;
  ops::attention_forward_fp8(out, s2, fresh, f.q, f.k, f.v, f.cu, f.lens, f.shape);
  ops::attention_backward_fp8(dq2, dk2, dv2, fresh, f.dout, s2, f.cu, f.lens, f.shape, /*calibrate=*/false);
  EXPECT_EQ(fresh.f32()[ops::kFa8DqScale], 1.0f);
  EXPECT_GT(rel_max_err(dq2, rq), 0.15);
}
