#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/norm/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

TEST(OpsNorm, LayerNormForwardMatchesNaive) {
  const int64_t N = 7, C = 33;
  Tensor x = randn({N, C}, 1, 3.0f), w = randn({C}, 2), b = randn({C}, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] += 100.0f;  // large mean: stable statistics
  Tensor out = Tensor::empty({N, C}, DType::F32), mean = Tensor::empty({N}, DType::F32),
         rstd = Tensor::empty({N}, DType::F32);
  const float eps = 1e-5f;
  ops::layernorm_forward(out, mean, rstd, x, w, b, eps);
  for (int64_t n = 0; n < N; ++n) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += x.f32()[n * C + c];
    mu /= C;
    for (int64_t c = 0; c < C; ++c) var += std::pow(x.f32()[n * C + c] - mu, 2);
    var /= C;
    const double r = 1 / std::sqrt(var + eps);
    EXPECT_NEAR(mean.f32()[n], mu, 1e-4);
    EXPECT_NEAR(rstd.f32()[n], r, 1e-5 * r);
    for (int64_t c = 0; c < C; ++c)
      EXPECT_NEAR(out.f32()[n * C + c], (x.f32()[n * C + c] - mu) * r * w.f32()[c] + b.f32()[c], 2e-4);
  }
  // No bias, no saved statistics.
  Tensor none, out2 = Tensor::empty({N, C}, DType::F32);
  ops::layernorm_forward(out2, none, none, x, w, none, eps);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      EXPECT_NEAR(out2.f32()[n * C + c], out.f32()[n * C + c] - b.f32()[c], 1e-5);
}

TEST(OpsNorm, LayerNormGradFD) {
  const int64_t N = 6, C = 10;
  Tensor x = randn({N, C}, 11), w = randn({C}, 12), b = randn({C}, 13), R = randn({N, C}, 14);
  Tensor out = Tensor::empty({N, C}, DType::F32), mean = Tensor::empty({N}, DType::F32),
         rstd = Tensor::empty({N}, DType::F32);
  auto objective = [&] {
    ops::layernorm_forward(out, mean, rstd, x, w, b, 1e-5f);
    return dot(out, R);
  };
  objective();
  Tensor dx = Tensor::empty({N, C}, DType::F32);
  Tensor dw = Tensor::zeros({C}, DType::F32), db = Tensor::zeros({C}, DType::F32);
  ops::layernorm_backward(dx, dw, db, R, x, w, mean, rstd);
  EXPECT_TRUE(fd_check("dx", objective, x, dx));
  EXPECT_TRUE(fd_check("dw", objective, w, dw));
  EXPECT_TRUE(fd_check("db", objective, b, db));
  // Parameter gradients accumulate; dx is overwritten.
  Tensor dx1 = dx.clone(), dw1 = dw.clone();
  ops::layernorm_backward(dx, dw, db, R, x, w, mean, rstd);
  EXPECT_TRUE(tensors_close(dx, dx1, 0.0));
  for (int64_t c = 0; c < C; ++c) EXPECT_FLOAT_EQ(dw.f32()[c], 2 * dw1.f32()[c]);
}

TEST(OpsNorm, LayerNormGradLargeThreaded) {
  // Many rows (threaded path with per-thread partial sums) against the FD of a subset.
  const int64_t N = 600, C = 96;
  Tensor x = randn({N, C}, 21), w = randn({C}, 22), b = randn({C}, 23), R = randn({N, C}, 24);
  Tensor out = Tensor::empty({N, C}, DType::F32), mean = Tensor::empty({N}, DType::F32),
         rstd = Tensor::empty({N}, DType::F32);
  auto objective = [&] {
    ops::layernorm_forward(out, mean, rstd, x, w, b, 1e-5f);
    return dot(out, R);
  };
  objective();
  Tensor dx = Tensor::empty({N, C}, DType::F32);
  Tensor dw = Tensor::zeros({C}, DType::F32), db = Tensor::zeros({C}, DType::F32);
  ops::layernorm_backward(dx, dw, db, R, x, w, mean, rstd);
  FdOptions o;
  o.max_samples = 48;
  EXPECT_TRUE(fd_check("dx", objective, x, dx, o));
  EXPECT_TRUE(fd_check("dw", objective, w, dw, o));
  EXPECT_TRUE(fd_check("db", objective, b, db, o));
}

TEST(OpsNorm, RmsNormForwardMatchesNaive) {
  const int64_t N = 5, C = 24;
  Tensor x = randn({N, C}, 31), w = randn({C}, 32);
  Tensor out = Tensor::empty({N, C}, DType::F32), rstd = Tensor::empty({N}, DType::F32);
  const float eps = 1e-6f;
  ops::rmsnorm_forward(out, rstd, x, w, eps);
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += std::pow(x.f32()[n * C + c], 2);
    const double r = 1 / std::sqrt(ms / C + eps);
    EXPECT_NEAR(rstd.f32()[n], r, 1e-6 * r);
    for (int64_t c = 0; c < C; ++c)
      EXPECT_NEAR(out.f32()[n * C + c], w.f32()[c] * x.f32()[n * C + c] * r, 1e-5);
  }
}

TEST(OpsNorm, RmsNormGradFD) {
  const int64_t N = 6, C = 12;
  Tensor x = randn({N, C}, 41), w = randn({C}, 42), R = randn({N, C}, 43);
  Tensor out = Tensor::empty({N, C}, DType::F32), rstd = Tensor::empty({N}, DType::F32);
  auto objective = [&] {
    ops::rmsnorm_forward(out, rstd, x, w, 1e-5f);
    return dot(out, R);
  };
  objective();
  Tensor dx = Tensor::empty({N, C}, DType::F32), dw = Tensor::zeros({C}, DType::F32);
  ops::rmsnorm_backward(dx, dw, R, x, w, rstd);
  EXPECT_TRUE(fd_check("dx", objective, x, dx));
  EXPECT_TRUE(fd_check("dw", objective, w, dw));
  Tensor none, dx2 = Tensor::empty({N, C}, DType::F32);
  ops::rmsnorm_backward(dx2, none, R, x, w, rstd);
  EXPECT_TRUE(tensors_close(dx2, dx, 0.0));
}

// dres folds a pre-norm block's residual gradient into the norm's dx pass: dx = norm' + dres,
// also when dres aliases dx.
TEST(OpsNorm, BackwardAddsResidualGradient) {
  const int64_t N = 7, C = 12;
  Tensor x = randn({N, C}, 51), w = randn({C}, 52), b = randn({C}, 53), R = randn({N, C}, 54), res = randn({N, C}, 55);
  Tensor out = Tensor::empty({N, C}, DType::F32), mean = Tensor::empty({N}, DType::F32), rstd = Tensor::empty({N}, DType::F32), none;
  ops::layernorm_forward(out, mean, rstd, x, w, b, 1e-5f);
  Tensor dx = Tensor::empty({N, C}, DType::F32), dx_res = Tensor::empty({N, C}, DType::F32);
  ops::layernorm_backward(dx, none, none, R, x, w, mean, rstd);
  ops::layernorm_backward(dx_res, none, none, R, x, w, mean, rstd, res);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_NEAR(dx_res.f32()[i], dx.f32()[i] + res.f32()[i], 1e-6);
  ops::rmsnorm_forward(out, rstd, x, w, 1e-5f);
  Tensor alias = res.clone();
  ops::rmsnorm_backward(dx, none, R, x, w, rstd);
  ops::rmsnorm_backward(alias, none, R, x, w, rstd, alias);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_NEAR(alias.f32()[i], dx.f32()[i] + res.f32()[i], 1e-6);
  Tensor bad = randn({N, C + 1}, 56);
  EXPECT_THROW(ops::rmsnorm_backward(dx, none, R, x, w, rstd, bad), Error);
}

TEST(OpsNorm, BadShapesThrow) {
  Tensor x = randn({4, 8}, 1), w = randn({8}, 2), b = randn({8}, 3);
  Tensor out = Tensor::empty({4, 8}, DType::F32), mean = Tensor::empty({4}, DType::F32),
         rstd = Tensor::empty({4}, DType::F32);
  Tensor w7 = randn({7}, 4), stat3 = Tensor::empty({3}, DType::F32),
         out_bad = Tensor::empty({4, 7}, DType::F32);
  EXPECT_THROW(ops::layernorm_forward(out, mean, rstd, x, w7, b, 1e-5f), Error);
  EXPECT_THROW(ops::layernorm_forward(out, stat3, rstd, x, w, b, 1e-5f), Error);
  EXPECT_THROW(ops::layernorm_forward(out_bad, mean, rstd, x, w, b, 1e-5f), Error);
  EXPECT_THROW(ops::rmsnorm_forward(out, stat3, x, w, 1e-5f), Error);
  EXPECT_THROW(ops::rmsnorm_forward(out, rstd, x, w7, 1e-5f), Error);
  Tensor dx = Tensor::empty({4, 8}, DType::F32), dw = Tensor::zeros({7}, DType::F32), none;
  EXPECT_THROW(ops::layernorm_backward(dx, dw, none, out, x, w, mean, rstd), Error);
  EXPECT_THROW(ops::rmsnorm_backward(dx, none, out, x, w, stat3), Error);
}

// The norms' optional amax output: max |out| (what FP8 scaling of the output needs).
TEST(OpsNorm, AmaxOutput) {
  Tensor x = biofm::testkit::randn({6, 16}, 91, 3.0f), w = biofm::testkit::randn({16}, 92);
  Tensor b = biofm::testkit::randn({16}, 93);
  Tensor out = Tensor::empty({6, 16}, DType::F32), rstd = Tensor::empty({6}, DType::F32);
  Tensor mean = Tensor::empty({6}, DType::F32);
  Tensor amax = Tensor::empty({1}, DType::F32);
  ops::rmsnorm_forward(out, rstd, x, w, 1e-5f, amax);
  EXPECT_EQ(amax.f32()[0], float(biofm::testkit::max_abs(out)));
  EXPECT_GT(amax.f32()[0], 0.0f);
  amax.f32()[0] = -1.0f;
  ops::layernorm_forward(out, mean, rstd, x, w, b, 1e-5f, amax);
  EXPECT_EQ(amax.f32()[0], float(biofm::testkit::max_abs(out)));
  EXPECT_GT(amax.f32()[0], 0.0f);
  // Backward: max |dx| of the input gradient (residual gradient included).
  Tensor dout = biofm::testkit::randn({6, 16}, 94), dres = biofm::testkit::randn({6, 16}, 95, 4.0f);
  Tensor dx = Tensor::empty({6, 16}, DType::F32), none;
  amax.f32()[0] = -1.0f;
  ops::layernorm_backward(dx, none, none, dout, x, w, mean, rstd, dres, amax);
  EXPECT_EQ(amax.f32()[0], float(biofm::testkit::max_abs(dx)));
  ops::rmsnorm_forward(out, rstd, x, w, 1e-5f);
  amax.f32()[0] = -1.0f;
  ops::rmsnorm_backward(dx, none, dout, x, w, rstd, Tensor(), amax);
  EXPECT_EQ(amax.f32()[0], float(biofm::testkit::max_abs(dx)));
  EXPECT_GT(amax.f32()[0], 0.0f);
  EXPECT_THROW(ops::rmsnorm_backward(none, none, dout, x, w, rstd, Tensor(), amax), Error);
}

// The norms writing FP8 codes with a given (DelayedScaling) scale (layernorm_forward_fp8 /
// rmsnorm_forward_fp8) against the norm written out here in double: each value quantized with
// the scale, both forms of the codes (the transposed ones zero past the rows), the amax folded
// into the history row (slot 0 only; a larger earlier value stays), the statistics; the delayed
// scale and the history row are required.
TEST(OpsNorm, Fp8CodesQuantizeTheNormWithTheGivenScale) {
  const int64_t N = 5, C = 16, Np = 16;
  const Tensor x = randn({N, C}, 11, 2.0f), w = randn({C}, 12), b = randn({C}, 13);
  for (bool rms : {false, true}) {
    const ops::Fp8Type t = rms ? ops::Fp8Type::E5M2 : ops::Fp8Type::E4M3;
    const float scale_amax = 1.5f;  // (some values saturate)
    Tensor q = Tensor::empty({N, C}, DType::U8), qt = Tensor::empty({C, Np}, DType::U8);
    Tensor s = Tensor::empty({1}, DType::F32), seen = Tensor::from_f32({2}, {0.5f, 7.0f});
    Tensor mean = Tensor::empty({N}, DType::F32), rstd = Tensor::empty({N}, DType::F32), none;
    const Tensor sa = Tensor::from_f32({1}, {scale_amax});
    if (rms)
      ops::rmsnorm_forward_fp8(q, qt, s, rstd, x, w, 1e-6f, t, sa, seen);
    else
      ops::layernorm_forward_fp8(q, qt, s, mean, rstd, x, w, b, 1e-5f, t, sa, seen);
    const float scale = ops::fp8_max(t) / scale_amax;
    EXPECT_FLOAT_EQ(s.f32()[0], 1.0f / scale);
    const uint8_t* codes = static_cast<const uint8_t*>(q.raw());
    const uint8_t* codes_t = static_cast<const uint8_t*>(qt.raw());
    double amax = 0;
    for (int64_t n = 0; n < N; ++n) {
      double mu = 0, ms = 0;
      for (int64_t c = 0; c < C; ++c) {
        mu += x.f32()[n * C + c];
        ms += double(x.f32()[n * C + c]) * x.f32()[n * C + c];
      }
      mu /= C;
      ms /= C;
      double var = 0;
      for (int64_t c = 0; c < C; ++c) var += std::pow(x.f32()[n * C + c] - mu, 2);
      var /= C;
      const double r = rms ? 1 / std::sqrt(ms + 1e-6) : 1 / std::sqrt(var + 1e-5);
      EXPECT_NEAR(rstd.f32()[n], r, 1e-5 * r);
      if (!rms) EXPECT_NEAR(mean.f32()[n], mu, 1e-5);
      for (int64_t c = 0; c < C; ++c) {
        const double v = rms ? x.f32()[n * C + c] * r * w.f32()[c] : (x.f32()[n * C + c] - mu) * r * w.f32()[c] + b.f32()[c];
        amax = std::max(amax, std::fabs(v));
        const double fmax = ops::fp8_max(t);
        const double want = std::fmin(std::fmax(v * scale, -fmax), fmax);
        const double half_step = (t == ops::Fp8Type::E4M3 ? 0.0625 : 0.125) * std::fabs(want) + 0.002;
        const uint8_t code = codes[n * C + c];
        EXPECT_NEAR(ops::fp8_decode(code, t), want, half_step) << (rms ? "rms " : "layer ") << n << "," << c;
        EXPECT_EQ(codes_t[c * Np + n], code);
      }
    }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t n = N; n < Np; ++n) EXPECT_EQ(codes_t[c * Np + n], 0) << "padding row " << n;
    EXPECT_NEAR(seen.f32()[0], amax, 1e-5 * amax);
    EXPECT_EQ(seen.f32()[1], 7.0f);
    EXPECT_GT(amax, scale_amax) << "no value saturated";
    Tensor larger = Tensor::from_f32({1}, {1e3f});
    if (rms)
      ops::rmsnorm_forward_fp8(q, qt, s, rstd, x, w, 1e-6f, t, sa, larger);
    else
      ops::layernorm_forward_fp8(q, qt, s, mean, rstd, x, w, b, 1e-5f, t, sa, larger);
    EXPECT_EQ(larger.f32()[0], 1e3f) << "an earlier micro batch's larger amax stays";
    EXPECT_THROW(ops::layernorm_forward_fp8(q, qt, s, mean, rstd, x, w, b, 1e-5f, t, Tensor(), seen), Error);
    EXPECT_THROW(ops::rmsnorm_forward_fp8(q, qt, s, rstd, x, w, 1e-6f, t, sa, none), Error);
  }
}
