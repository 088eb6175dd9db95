#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/activation/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

TEST(OpsActivation, GeluKnownValues) {
  Tensor x = Tensor::from_f32({5}, {-3.0f, -1.0f, 0.0f, 1.0f, 2.5f});
  Tensor y = Tensor::empty({5}, DType::F32);
  ops::gelu_forward(y, x, ops::GeluKind::Erf);
  for (int i = 0; i < 5; ++i) {
    const double v = x.f32()[i];
    EXPECT_NEAR(y.f32()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
  }
  EXPECT_NEAR(y.f32()[3], 0.8413447460685429, 1e-6);
  EXPECT_NEAR(y.f32()[1], -0.15865525393145707, 1e-6);
  ops::gelu_forward(y, x, ops::GeluKind::Tanh);
  for (int i = 0; i < 5; ++i) {
    const double v = x.f32()[i];
    const double t = std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v));
    EXPECT_NEAR(y.f32()[i], 0.5 * v * (1 + t), 1e-6);
  }
  EXPECT_NEAR(y.f32()[3], 0.8411919906082768, 1e-6);
  // In place (out aliases x).
  Tensor z = x.clone();
  ops::gelu_forward(z, z, ops::GeluKind::Tanh);
  EXPECT_TRUE(tensors_close(z, y, 0.0));
}

TEST(OpsActivation, GeluErfGradFD) {
  for (auto kind : {ops::GeluKind::Erf, ops::GeluKind::Tanh}) {
    Tensor x = randn({7, 9}, 1, 2.0f), R = randn({7, 9}, 2);
    Tensor y = Tensor::empty({7, 9}, DType::F32);
    auto objective = [&] {
      ops::gelu_forward(y, x, kind);
      return dot(y, R);
    };
    Tensor dx = Tensor::empty({7, 9}, DType::F32);
    ops::gelu_backward(dx, R, x, kind);
    EXPECT_TRUE(fd_check(kind == ops::GeluKind::Erf ? "gelu erf dx" : "gelu tanh dx", objective, x, dx));
    // dx may alias dout.
    Tensor g = R.clone();
    ops::gelu_backward(g, g, x, kind);
    EXPECT_TRUE(tensors_close(g, dx, 0.0));
  }
}

TEST(OpsActivation, GeluTanhGradFD) {
  // Wide inputs (tails of tanh, large |x|) with a smaller step.
  Tensor x = randn({200}, 3, 4.0f), R = randn({200}, 4);
  Tensor y = Tensor::empty({200}, DType::F32);
  auto objective = [&] {
    ops::gelu_forward(y, x, ops::GeluKind::Tanh);
    return dot(y, R);
  };
  Tensor dx = Tensor::empty({200}, DType::F32);
  ops::gelu_backward(dx, R, x, ops::GeluKind::Tanh);
  FdOptions o;
  o.eps = 3e-3;
  EXPECT_TRUE(fd_check("gelu tanh dx", objective, x, dx, o));
}

TEST(OpsActivation, SwigluForwardAndGradFD) {
  const int64_t N = 6, F = 11;
  Tensor gate = randn({N, F}, 5, 2.0f), up = randn({N, F}, 6), R = randn({N, F}, 7);
  Tensor out = Tensor::empty({N, F}, DType::F32);
  ops::swiglu_forward(out, gate, up);
  for (int64_t i = 0; i < N * F; ++i) {
    const double g = gate.f32()[i];
    EXPECT_NEAR(out.f32()[i], g / (1 + std::exp(-g)) * up.f32()[i], 1e-5);
  }
  auto objective = [&] {
    ops::swiglu_forward(out, gate, up);
    return dot(out, R);
  };
  Tensor dgate = Tensor::empty({N, F}, DType::F32), dup = Tensor::empty({N, F}, DType::F32);
  ops::swiglu_backward(dgate, dup, R, gate, up);
  EXPECT_TRUE(fd_check("dgate", objective, gate, dgate));
  EXPECT_TRUE(fd_check("dup", objective, up, dup));
}

TEST(OpsActivation, BadShapesThrow) {
  Tensor x = randn({4, 5}, 1), y = Tensor::empty({4, 6}, DType::F32);
  EXPECT_THROW(ops::gelu_forward(y, x, ops::GeluKind::Erf), Error);
  EXPECT_THROW(ops::gelu_backward(y, x, x, ops::GeluKind::Erf), Error);
  Tensor up = randn({4, 6}, 2), out = Tensor::empty({4, 5}, DType::F32);
  EXPECT_THROW(ops::swiglu_forward(out, x, up), Error);
  Tensor dg = Tensor::empty({4, 5}, DType::F32), du = Tensor::empty({4, 5}, DType::F32);
  EXPECT_THROW(ops::swiglu_backward(dg, du, up, x, x), Error);
}

// The packed form (gate | up per row of one [N, 2F] tensor, as the fused gate/up GEMM
// writes it) computes exactly what the separate form does.
TEST(OpsActivation, SwigluPackedMatchesSeparate) {
  const int64_t N = 5, F = 9;
  Tensor gu = randn({N, 2 * F}, 8, 2.0f), R = randn({N, F}, 9);
  Tensor gate = Tensor::empty({N, F}, DType::F32), up = Tensor::empty({N, F}, DType::F32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < F; ++j) {
      gate.f32()[n * F + j] = gu.f32()[n * 2 * F + j];
      up.f32()[n * F + j] = gu.f32()[n * 2 * F + F + j];
    }
  Tensor out = Tensor::empty({N, F}, DType::F32), ref = Tensor::empty({N, F}, DType::F32);
  ops::swiglu_forward_packed(out, gu);
  ops::swiglu_forward(ref, gate, up);
  EXPECT_TRUE(tensors_close(out, ref, 0.0));
  Tensor dgu = Tensor::empty({N, 2 * F}, DType::F32);
  Tensor dg = Tensor::empty({N, F}, DType::F32), du = Tensor::empty({N, F}, DType::F32);
  ops::swiglu_backward_packed(dgu, R, gu);
  ops::swiglu_backward(dg, du, R, gate, up);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < F; ++j) {
      EXPECT_EQ(dgu.f32()[n * 2 * F + j], dg.f32()[n * F + j]);
      EXPECT_EQ(dgu.f32()[n * 2 * F + F + j], du.f32()[n * F + j]);
    }
  Tensor bad = Tensor::empty({N, 2 * F + 1}, DType::F32);
  EXPECT_THROW(ops::swiglu_forward_packed(out, bad), Error);
}

// The optional amax outputs of the packed SwiGLU: max |value| written (what FP8 scaling needs).
TEST(OpsActivation, SwigluPackedAmaxOutputs) {
  const int64_t N = 5, F = 8;
  Tensor gu = biofm::testkit::randn({N, 2 * F}, 71, 2.0f), dh = biofm::testkit::randn({N, F}, 72);
  Tensor h = Tensor::empty({N, F}, DType::F32), dgu = Tensor::empty({N, 2 * F}, DType::F32);
  Tensor h_amax = Tensor::empty({1}, DType::F32), dgu_amax = Tensor::empty({1}, DType::F32);
  ops::swiglu_forward_packed(h, gu, h_amax);
  ops::swiglu_backward_packed(dgu, dh, gu, dgu_amax);
  EXPECT_EQ(h_amax.f32()[0], float(biofm::testkit::max_abs(h)));
  EXPECT_EQ(dgu_amax.f32()[0], float(biofm::testkit::max_abs(dgu)));
  EXPECT_GT(h_amax.f32()[0], 0.0f);
}

// GELU's optional amax outputs, as SwiGLU's: max |value| written.
TEST(OpsActivation, GeluAmaxOutputs) {
  const int64_t n = 40;
  Tensor x = biofm::testkit::randn({n}, 73, 2.0f), g = biofm::testkit::randn({n}, 74);
  Tensor y = Tensor::empty({n}, DType::F32), dx = Tensor::empty({n}, DType::F32);
  Tensor y_amax = Tensor::empty({1}, DType::F32), dx_amax = Tensor::empty({1}, DType::F32);
  ops::gelu_forward(y, x, ops::GeluKind::Erf, y_amax);
  ops::gelu_backward(dx, g, x, ops::GeluKind::Erf, dx_amax);
  EXPECT_EQ(y_amax.f32()[0], float(biofm::testkit::max_abs(y)));
  EXPECT_EQ(dx_amax.f32()[0], float(biofm::testkit::max_abs(dx)));
  EXPECT_GT(y_amax.f32()[0], 0.0f);
}
