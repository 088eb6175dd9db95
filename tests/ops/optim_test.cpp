#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "biofm/ops/optim/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

namespace {

// torch.optim.AdamW in double: decoupled decay, bias corrections, eps after the sqrt.
struct RefAdamW {
  std::vector<double> p, m, v;
  void step(const std::vector<double>& g, double lr, double b1, double b2, double eps, double wd,
            int t) {
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

}  // namespace

TEST(OpsOptim, AdamWTwoStepsMatchDoubleReference) {
  const int64_t n = 1000;
  Tensor p = randn({n}, 1), m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  Tensor g1 = randn({n}, 2, 0.1f), g2 = randn({n}, 3, 0.1f);
  // A few tiny gradients, where eps matters.
  for (int64_t i = 0; i < 10; ++i) g1.f32()[i] = g2.f32()[i] = 1e-7f * float(i + 1);
  RefAdamW ref;
  for (int64_t i = 0; i < n; ++i) {
    ref.p.push_back(p.f32()[i]);
    ref.m.push_back(0);
    ref.v.push_back(0);
  }
  ops::AdamWHyper h;
  h.lr = 1e-2f;
  h.beta1 = 0.9f;
  h.beta2 = 0.98f;
  h.eps = 1e-6f;
  h.weight_decay = 0.1f;
  for (int t = 1; t <= 2; ++t) {
    h.step = t;
    const Tensor& g = t == 1 ? g1 : g2;
    ops::adamw_step(p, g, m, v, h);
    std::vector<double> gd(g.f32(), g.f32() + n);
    ref.step(gd, 1e-2, 0.9, 0.98, 1e-6, 0.1, t);
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(p.f32()[i], ref.p[size_t(i)], 1e-6 * (1 + std::fabs(ref.p[size_t(i)]))) << i;
    EXPECT_NEAR(m.f32()[i], ref.m[size_t(i)], 1e-6 * std::fabs(ref.m[size_t(i)]) + 1e-9) << i;
    EXPECT_NEAR(v.f32()[i], ref.v[size_t(i)], 1e-6 * std::fabs(ref.v[size_t(i)]) + 1e-10) << i;
  }
}

// Bit patterns of p, m, v after two steps of torch.optim.AdamW (torch 2.11 on an x86 CPU;
// foreach, single-tensor and fused all agree) from the inputs below, with lr 1e-2,
// betas (0.9, 0.98), eps 1e-6, weight_decay 0.1.
TEST(OpsOptim, AdamWMatchesTorchBitwise) {
  const int n = 16;
  std::vector<float> p0(n), g1(n), g2(n);
  for (int i = 0; i < n; ++i) {
    p0[size_t(i)] = float(std::sin(i + 1.0));
    g1[size_t(i)] = float(0.1 * std::cos(1.3 * i));
    g2[size_t(i)] = float(0.05 * std::sin(0.7 * i + 0.2));
  }
  g1[0] = 1e-7f;
  g2[0] = -2e-7f;
  const uint32_t want_p[n] = {0x3f56e1a3, 0x3f6338b5, 0x3e1c89c8, 0xbf3e23d2, 0xbf798a59, 0xbe963650,
                              0x3f26fcb5, 0x3f80db10, 0x3edc5752, 0xbf0f8fdd, 0xbf823165, 0xbf07cefb,
                              0x3eddb6f2, 0x3f808382, 0x3f229292, 0xbe993499};
  const uint32_t want_m[n] = {0xb23cfa83, 0x3bcf3a99, 0xbb31df8f, 0xbb37d1d0, 0x3ba14ad4, 0x3bc932f5,
                              0xbb8bff96, 0xbc579708, 0xbbf18fb9, 0x3be23aad, 0x3c46d364, 0x3b67b6d1,
                              0xbbacdf0d, 0xbb315125, 0x3b91b8b4, 0x3b1bebaf};
  const uint32_t want_v[n] = {0x268f89ea, 0x383b8195, 0x394b4a1e, 0x39097597, 0x3838a15a, 0x3952ba6c,
                              0x38404cd4, 0x3965884d, 0x3897fd83, 0x38b13c4e, 0x394a4377, 0x3866e06d,
                              0x39676959, 0x37e74d17, 0x3911da7c, 0x3932241b};
  Tensor p = Tensor::from_f32({n}, p0), m = Tensor::zeros({n}, DType::F32),
         v = Tensor::zeros({n}, DType::F32);
  Tensor t1 = Tensor::from_f32({n}, g1), t2 = Tensor::from_f32({n}, g2);
  ops::AdamWHyper h;
  h.lr = 1e-2f;
  h.beta1 = 0.9f;
  h.beta2 = 0.98f;
  h.eps = 1e-6f;
  h.weight_decay = 0.1f;
  h.step = 1;
  ops::adamw_step(p, t1, m, v, h);
  h.step = 2;
  ops::adamw_step(p, t2, m, v, h);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(p.f32()[i]), want_p[i]) << "p[" << i << "]";
    EXPECT_EQ(std::bit_cast<uint32_t>(m.f32()[i]), want_m[i]) << "m[" << i << "]";
    EXPECT_EQ(std::bit_cast<uint32_t>(v.f32()[i]), want_v[i]) << "v[" << i << "]";
  }
}

TEST(OpsOptim, AdamWHandValuesFirstStep) {
  // Step 1 from zero moments: m̂ = g, v̂ = g², so p ← p(1 - lr·wd) - lr·g/(|g| + eps).
  Tensor p = Tensor::from_f32({3}, {1.0f, -2.0f, 0.5f});
  Tensor g = Tensor::from_f32({3}, {0.3f, -4.0f, 0.0f});
  Tensor m = Tensor::zeros({3}, DType::F32), v = Tensor::zeros({3}, DType::F32);
  ops::AdamWHyper h;
  h.lr = 0.1f;
  h.weight_decay = 0.5f;
  h.eps = 1e-8f;
  h.step = 1;
  ops::adamw_step(p, g, m, v, h);
  EXPECT_NEAR(p.f32()[0], 1.0 * 0.95 - 0.1, 1e-6);
  EXPECT_NEAR(p.f32()[1], -2.0 * 0.95 + 0.1, 1e-6);
  EXPECT_NEAR(p.f32()[2], 0.5 * 0.95, 1e-7);
  EXPECT_NEAR(m.f32()[1], -0.4, 1e-7);
  EXPECT_NEAR(v.f32()[1], 0.02 * 16, 1e-6);
}

TEST(OpsOptim, SumSquaresAndScale) {
  Tensor g = randn({100000}, 4);
  Tensor acc = Tensor::from_f32({1}, {2.0f});
  ops::sum_squares_accumulate(acc, g);
  double s = 2.0;
  for (int64_t i = 0; i < g.numel(); ++i) s += double(g.f32()[i]) * g.f32()[i];
  EXPECT_NEAR(acc.f32()[0], s, 1e-6 * s);
  Tensor g0 = g.clone();
  ops::scale_inplace(g, 0.25f);
  for (int64_t i = 0; i < g.numel(); i += 1001) EXPECT_EQ(g.f32()[i], g0.f32()[i] * 0.25f);
}

TEST(OpsOptim, BadShapesThrow) {
  Tensor p = randn({4}, 1), g = randn({5}, 2), m = Tensor::zeros({4}, DType::F32),
         v = Tensor::zeros({4}, DType::F32);
  ops::AdamWHyper h;
  EXPECT_THROW(ops::adamw_step(p, g, m, v, h), Error);
  Tensor g4 = randn({4}, 3);
  Tensor v2 = Tensor::zeros({2, 2}, DType::F32);
  EXPECT_THROW(ops::adamw_step(p, g4, m, v2, h), Error);
  h.step = 0;
  EXPECT_THROW(ops::adamw_step(p, g4, m, v, h), Error);
  Tensor acc2 = Tensor::zeros({2}, DType::F32);
  EXPECT_THROW(ops::sum_squares_accumulate(acc2, g), Error);
}

TEST(OpsOptim, GradNormClipCoef) {
  Tensor g = randn({5000}, 7);
  double s = 0;
  for (int64_t i = 0; i < g.numel(); ++i) s += double(g.f32()[i]) * g.f32()[i];
  Tensor norm = Tensor::empty({1}, DType::F32), coef = Tensor::empty({1}, DType::F32);
  ops::grad_norm_clip_coef(norm, coef, g, 1.0f);
  EXPECT_NEAR(norm.f32()[0], std::sqrt(s), 1e-5 * std::sqrt(s));
  EXPECT_NEAR(coef.f32()[0], 1.0 / (std::sqrt(s) + 1e-6), 1e-6);
  ops::grad_norm_clip_coef(norm, coef, g, 1e6f);  // never above 1
  EXPECT_EQ(coef.f32()[0], 1.0f);
  ops::grad_norm_clip_coef(norm, coef, g, 0.0f);  // clipping off
  EXPECT_EQ(coef.f32()[0], 1.0f);
}

// grad holding d times the gradient: norm and clip are those of grad / d, and the clip
// coefficient carries the 1/d, so grad · clip_coef is the clipped gradient.
TEST(OpsOptim, GradNormClipCoefWithDivisor) {
  Tensor g = randn({5000}, 7);
  Tensor scaled = g.clone();
  ops::scale_inplace(scaled, 300.0f);
  Tensor d = Tensor::from_f32({1}, {300.0f});
  Tensor n1 = Tensor::empty({1}, DType::F32), c1 = Tensor::empty({1}, DType::F32);
  Tensor n2 = Tensor::empty({1}, DType::F32), c2 = Tensor::empty({1}, DType::F32);
  for (float max_norm : {0.0f, 1.0f, 1e6f}) {
    ops::grad_norm_clip_coef(n1, c1, g, max_norm);
    ops::grad_norm_clip_coef(n2, c2, scaled, max_norm, d);
    EXPECT_NEAR(n2.f32()[0], n1.f32()[0], 1e-5 * n1.f32()[0]);
    EXPECT_NEAR(c2.f32()[0] * 300.0f, c1.f32()[0], 1e-5 * c1.f32()[0]);
  }
  Tensor zero = Tensor::from_f32({1}, {0.0f});  // a step without labels: divisor counts as 1
  ops::grad_norm_clip_coef(n2, c2, g, 1.0f, zero);
  EXPECT_EQ(n2.f32()[0], n1.f32()[0]);
}

TEST(OpsOptim, AdamWFlatMatchesPerRangeSteps) {
  // Decay on [10, 9000) and [9000, 12000) (adjacent) and [15000, 20000); none elsewhere.
  const int64_t n = 20000;
  Tensor p = randn({n}, 8), g = randn({n}, 9, 0.1f);
  Tensor m = randn({n}, 10, 0.01f), v = rand_uniform({n}, 11, 0.0f, 1e-3f);
  Tensor ranges = Tensor::empty({3, 2}, DType::I64);
  const int64_t r[6] = {10, 9000, 9000, 12000, 15000, 20000};
  for (int i = 0; i < 6; ++i) ranges.i64()[i] = r[i];
  const float c = 0.37f;
  Tensor coef = Tensor::from_f32({1}, {c});
  ops::AdamWHyper h;
  h.lr = 3e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-8f;
  h.weight_decay = 0.1f;
  h.step = 7;
  // Reference: adamw_step piecewise on clipped grads, wd per range.
  Tensor rp = p.clone(), rm = m.clone(), rv = v.clone(), rg = g.clone();
  for (int64_t i = 0; i < n; ++i) rg.f32()[i] *= c;
  auto piece = [&](int64_t a, int64_t b, float wd) {
    Tensor pp = rp.narrow0(a, b - a), gg = rg.narrow0(a, b - a), mm = rm.narrow0(a, b - a),
           vv = rv.narrow0(a, b - a);
    ops::AdamWHyper hh = h;
    hh.weight_decay = wd;
    ops::adamw_step(pp, gg, mm, vv, hh);
  };
  piece(0, 10, 0.0f);
  piece(10, 12000, 0.1f);
  piece(12000, 15000, 0.0f);
  piece(15000, 20000, 0.1f);
  Tensor copy = Tensor::empty({n}, DType::BF16);
  ops::adamw_flat(p, copy, g, m, v, ranges, coef, h);
  EXPECT_TRUE(tensors_close(p, rp, 0.0));
  EXPECT_TRUE(tensors_close(m, rm, 0.0));
  EXPECT_TRUE(tensors_close(v, rv, 0.0));
  for (int64_t i = 0; i < n; i += 7) EXPECT_EQ(copy.bf()[i], f32_to_bf16(p.f32()[i]));
  // No compute copy, no ranges: plain decay-free AdamW.
  Tensor none, no_ranges = Tensor::empty({0, 2}, DType::I64);
  Tensor one = Tensor::from_f32({1}, {1.0f});
  Tensor p2 = randn({100}, 12), g2 = randn({100}, 13), m2 = Tensor::zeros({100}, DType::F32),
         v2 = Tensor::zeros({100}, DType::F32);
  Tensor p3 = p2.clone(), m3 = m2.clone(), v3 = v2.clone();
  ops::adamw_flat(p2, none, g2, m2, v2, no_ranges, one, h);
  ops::AdamWHyper h0 = h;
  h0.weight_decay = 0.0f;
  ops::adamw_step(p3, g2, m3, v3, h0);
  EXPECT_TRUE(tensors_close(p2, p3, 0.0));
  // Bad ranges throw.
  Tensor bad = Tensor::empty({1, 2}, DType::I64);
  bad.i64()[0] = 50;
  bad.i64()[1] = 101;
  EXPECT_THROW(ops::adamw_flat(p2, none, g2, m2, v2, bad, one, h), Error);
}
