// adamw_flat on pure bf16 parameters (precision "bf16"), CPU: the same fp32 update as the
// F32 path, rounded to bf16 when written back.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "biofm/ops/optim/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

namespace {

Tensor abs_of(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = std::fabs(t.f32()[i]);
  return t;
}

Tensor ranges_tensor(const std::vector<int64_t>& r) {
  Tensor t = Tensor::empty({int64_t(r.size() / 2), 2}, DType::I64);
  for (size_t i = 0; i < r.size(); ++i) t.i64()[i] = r[i];
  return t;
}

bool inside(const std::vector<int64_t>& r, int64_t i) {
  for (size_t k = 0; k + 1 < r.size(); k += 2)
    if (i >= r[k] && i < r[k + 1]) return true;
  return false;
}

}  // namespace

// One step from the same state: BF16 params end up exactly at the F32 path's result rounded
// to nearest even, and the moments are bit-identical. Several chunks, two decay ranges,
// gradient clipping (clip_coef < 1), and also the F32 path's bf16 compute copy.
TEST(OpsOptimBf16, OneStepEqualsF32PathRounded) {
  const int64_t n = 20011;  // several 8192-element chunks, odd tail
  const std::vector<int64_t> r = {10, 5001, 7003, 20000};
  const Tensor dr = ranges_tensor(r);
  const Tensor pb0 = randn({n}, 1).to(DType::BF16);  // bf16 parameters
  const Tensor m0 = randn({n}, 2, 0.01f), v0 = abs_of(randn({n}, 3, 1e-4f));
  const Tensor g = randn({n}, 4, 0.05f);
  const Tensor clip = Tensor::from_f32({1}, {0.4f});
  for (int64_t step : {int64_t(1), int64_t(7)}) {
    ops::AdamWHyper h{1e-3f, 0.9f, 0.98f, 1e-8f, 0.1f, step};
    // F32 path on the widened parameters, with the bf16 compute copy.
    Tensor p32 = pb0.to(DType::F32), m1 = m0.clone(), v1 = v0.clone();
    Tensor copy = Tensor::zeros({n}, DType::BF16);
    ops::adamw_flat(p32, copy, g, m1, v1, dr, clip, h);
    // BF16 path.
    Tensor pb = pb0.clone(), m2 = m0.clone(), v2 = v0.clone(), none;
    ops::adamw_flat(pb, none, g, m2, v2, dr, clip, h);
    ASSERT_EQ(pb.dtype(), DType::BF16);
    int64_t moved = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(pb.bf()[i], f32_to_bf16(p32.f32()[i])) << "step " << step << " element " << i;
      ASSERT_EQ(pb.bf()[i], copy.bf()[i]) << "element " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(m2.f32()[i]), std::bit_cast<uint32_t>(m1.f32()[i])) << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(v2.f32()[i]), std::bit_cast<uint32_t>(v1.f32()[i])) << i;
      moved += pb.bf()[i] != pb0.bf()[i];
    }
    // Not vacuous: many parameters move (updates below half a bf16 ulp are lost, by design).
    EXPECT_GT(moved, n / 10);
  }
}

// Zero gradients and moments: only the decayed elements change, to bf16(p · (1 - lr·wd)).
TEST(OpsOptimBf16, DecayRangesRespected) {
  const int64_t n = 9000;
  const std::vector<int64_t> r = {0, 3, 100, 4200, 8999, 9000};
  const Tensor dr = ranges_tensor(r);
  const Tensor pb0 = randn({n}, 11).to(DType::BF16);
  Tensor pb = pb0.clone(), none;
  Tensor g = Tensor::zeros({n}, DType::F32), m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  const Tensor one = Tensor::from_f32({1}, {1.0f});
  ops::AdamWHyper h{1e-2f, 0.9f, 0.98f, 1e-8f, 0.5f, 1};
  ops::adamw_flat(pb, none, g, m, v, dr, one, h);
  const float decay = float(1.0 - 1e-2 * 0.5);
  int64_t changed = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool in = inside(r, i);
    const bf16 want = in ? f32_to_bf16(bf16_to_f32(pb0.bf()[i]) * decay) : pb0.bf()[i];
    ASSERT_EQ(pb.bf()[i], want) << "element " << i << (in ? " (decayed)" : " (not decayed)");
    changed += pb.bf()[i] != pb0.bf()[i];
  }
  EXPECT_GT(changed, 0);  // a 0.5% decay moves many bf16 values by at least one ulp
  // Undefined ranges: no decay anywhere, nothing moves.
  Tensor pc = pb0.clone(), nodr;
  ops::adamw_flat(pc, none, g, m, v, nodr, one, h);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(pc.bf()[i], pb0.bf()[i]) << i;
}

// A non-finite clip coefficient (non-finite gradient norm) leaves params and moments untouched.
TEST(OpsOptimBf16, NonFiniteClipSkipsTheStep) {
  const int64_t n = 1000;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Tensor g = randn({n}, 21);
    g.f32()[17] = bad;
    Tensor norm = Tensor::empty({1}, DType::F32), clip = Tensor::empty({1}, DType::F32);
    ops::grad_norm_clip_coef(norm, clip, g, 1.0f);
    ASSERT_TRUE(std::isnan(clip.f32()[0]));
    const Tensor pb0 = randn({n}, 22).to(DType::BF16), m0 = randn({n}, 23), v0 = abs_of(randn({n}, 24));
    Tensor pb = pb0.clone(), m = m0.clone(), v = v0.clone(), none;
    ops::AdamWHyper h{1e-3f, 0.9f, 0.98f, 1e-8f, 0.1f, 3};
    ops::adamw_flat(pb, none, g, m, v, ranges_tensor({0, n}), clip, h);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(pb.bf()[i], pb0.bf()[i]) << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(m.f32()[i]), std::bit_cast<uint32_t>(m0.f32()[i])) << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(v.f32()[i]), std::bit_cast<uint32_t>(v0.f32()[i])) << i;
    }
  }
}

TEST(OpsOptimBf16, BadArgumentsThrow) {
  const int64_t n = 8;
  Tensor pb = Tensor::zeros({n}, DType::BF16), g = Tensor::zeros({n}, DType::F32);
  Tensor m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  const Tensor clip = Tensor::from_f32({1}, {1.0f}), dr;
  ops::AdamWHyper h;
  // BF16 parameters take no compute copy.
  Tensor copy = Tensor::zeros({n}, DType::BF16);
  EXPECT_THROW(ops::adamw_flat(pb, copy, g, m, v, dr, clip, h), Error);
  // Moments and gradients stay F32.
  Tensor mb = Tensor::zeros({n}, DType::BF16), none;
  EXPECT_THROW(ops::adamw_flat(pb, none, g, mb, v, dr, clip, h), Error);
  Tensor gb = Tensor::zeros({n}, DType::BF16);
  EXPECT_THROW(ops::adamw_flat(pb, none, gb, m, v, dr, clip, h), Error);
  // Other parameter dtypes are refused.
  Tensor pi = Tensor::zeros({n}, DType::I32);
  EXPECT_THROW(ops::adamw_flat(pi, none, g, m, v, dr, clip, h), Error);
}
