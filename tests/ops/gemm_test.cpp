#include <gtest/gtest.h>

#include "biofm/ops/gemm/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

namespace {

// out[n,o] = Σ_i x[n,i]·w[o,i] + b[o], in double.
Tensor naive_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t N = x.size(0), I = x.size(1), O = w.size(0);
  Tensor out = Tensor::empty({N, O}, DType::F32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double s = b.defined() ? b.f32()[o] : 0.0;
      for (int64_t i = 0; i < I; ++i) s += double(x.f32()[n * I + i]) * w.f32()[o * I + i];
      out.f32()[n * O + o] = float(s);
    }
  return out;
}

}  // namespace

TEST(OpsGemm, LinearForwardMatchesNaive) {
  Tensor x = randn({9, 13}, 1), w = randn({6, 13}, 2), b = randn({6}, 3);
  Tensor out = Tensor::empty({9, 6}, DType::F32);
  ops::linear_forward(out, x, w, b);
  EXPECT_TRUE(tensors_close(out, naive_linear(x, w, b), 1e-5, 1e-5));
  Tensor none;
  ops::linear_forward(out, x, w, none);
  EXPECT_TRUE(tensors_close(out, naive_linear(x, w, none), 1e-5, 1e-5));
  // Leading dimensions are flattened: x[3,3,13] is 9 rows.
  Tensor out3 = Tensor::empty({3, 3, 6}, DType::F32);
  ops::linear_forward(out3, x.view({3, 3, 13}), w, b);
  EXPECT_TRUE(tensors_close(out3, naive_linear(x, w, b), 1e-5, 1e-5));
}

// The residual operand: out = x·Wᵀ + b + residual (the block's residual add in the GEMM).
TEST(OpsGemm, LinearForwardWithResidual) {
  Tensor x = randn({9, 13}, 1), w = randn({6, 13}, 2), b = randn({6}, 3), r = randn({9, 6}, 4);
  Tensor out = Tensor::empty({9, 6}, DType::F32), none;
  ops::linear_forward(out, x, w, b, r);
  Tensor ref = naive_linear(x, w, b);
  for (int64_t i = 0; i < ref.numel(); ++i) ref.f32()[i] += r.f32()[i];
  EXPECT_TRUE(tensors_close(out, ref, 1e-5, 1e-5));
  ops::linear_forward(out, x, w, none, r);
  Tensor ref2 = naive_linear(x, w, none);
  for (int64_t i = 0; i < ref2.numel(); ++i) ref2.f32()[i] += r.f32()[i];
  EXPECT_TRUE(tensors_close(out, ref2, 1e-5, 1e-5));
  Tensor bad = randn({9, 5}, 5);
  EXPECT_THROW(ops::linear_forward(out, x, w, b, bad), Error);
}

TEST(OpsGemm, LinearGradFD) {
  const int64_t N = 5, I = 7, O = 4;
  Tensor x = randn({N, I}, 11), w = randn({O, I}, 12), b = randn({O}, 13), R = randn({N, O}, 14);
  Tensor out = Tensor::empty({N, O}, DType::F32);
  auto objective = [&] {
    ops::linear_forward(out, x, w, b);
    return dot(out, R);
  };
  Tensor dx = Tensor::empty({N, I}, DType::F32);
  Tensor dw = Tensor::zeros({O, I}, DType::F32), db = Tensor::zeros({O}, DType::F32);
  ops::linear_backward(dx, dw, db, R, x, w);
  EXPECT_TRUE(fd_check("dx", objective, x, dx));
  EXPECT_TRUE(fd_check("dw", objective, w, dw));
  EXPECT_TRUE(fd_check("dbias", objective, b, db));
}

TEST(OpsGemm, LinearBackwardAccumulatesParamsOverwritesDx) {
  const int64_t N = 6, I = 5, O = 3;
  Tensor x = randn({N, I}, 21), w = randn({O, I}, 22), g = randn({N, O}, 23);
  Tensor dx = Tensor::empty({N, I}, DType::F32);
  Tensor dw = Tensor::zeros({O, I}, DType::F32), db = Tensor::zeros({O}, DType::F32);
  ops::linear_backward(dx, dw, db, g, x, w);
  Tensor dx1 = dx.clone(), dw1 = dw.clone(), db1 = db.clone();
  dx.fill_(123.0f);  // overwritten, not accumulated
  ops::linear_backward(dx, dw, db, g, x, w);
  EXPECT_TRUE(tensors_close(dx, dx1, 0.0));
  for (int64_t i = 0; i < dw.numel(); ++i) EXPECT_FLOAT_EQ(dw.f32()[i], 2 * dw1.f32()[i]);
  for (int64_t i = 0; i < db.numel(); ++i) EXPECT_FLOAT_EQ(db.f32()[i], 2 * db1.f32()[i]);
  // Undefined outputs are skipped.
  Tensor none, dw2 = Tensor::zeros({O, I}, DType::F32);
  ops::linear_backward(none, dw2, none, g, x, w);
  EXPECT_TRUE(tensors_close(dw2, dw1, 0.0));
  Tensor dx3 = Tensor::empty({N, I}, DType::F32);
  ops::linear_backward(dx3, none, none, g, x, w);
  EXPECT_TRUE(tensors_close(dx3, dx1, 0.0));
}

TEST(OpsGemm, LinearBiasGradLargeBatch) {
  // Enough rows for the threaded column-sum path.
  const int64_t N = 3000, I = 4, O = 40;
  Tensor x = randn({N, I}, 31), w = randn({O, I}, 32), g = randn({N, O}, 33);
  Tensor db = Tensor::zeros({O}, DType::F32);
  Tensor none;
  ops::linear_backward(none, none, db, g, x, w);
  for (int64_t o = 0; o < O; ++o) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += g.f32()[n * O + o];
    EXPECT_NEAR(db.f32()[o], s, 1e-4 * (1 + std::fabs(s)));
  }
}

TEST(OpsGemm, LinearBadShapesThrow) {
  Tensor x = randn({4, 5}, 1), w = randn({3, 5}, 2), b = randn({3}, 3);
  Tensor out = Tensor::empty({4, 3}, DType::F32);
  Tensor bad_out = Tensor::empty({4, 4}, DType::F32);
  Tensor bad_w = randn({3, 6}, 4), bad_b = randn({4}, 5);
  Tensor none;
  EXPECT_THROW(ops::linear_forward(bad_out, x, w, b), Error);
  EXPECT_THROW(ops::linear_forward(out, x, bad_w, b), Error);
  EXPECT_THROW(ops::linear_forward(out, x, w, bad_b), Error);
  EXPECT_THROW(ops::linear_forward(out, x, w.view({15}), b), Error);
  Tensor xi = Tensor::zeros({4, 5}, DType::I32);
  EXPECT_THROW(ops::linear_forward(out, xi, w, b), Error);
  Tensor dx = Tensor::empty({4, 5}, DType::F32), dw = Tensor::zeros({3, 5}, DType::F32);
  Tensor bad_dw = Tensor::zeros({5, 3}, DType::F32), bad_g = randn({4, 2}, 6);
  EXPECT_THROW(ops::linear_backward(dx, bad_dw, none, out, x, w), Error);
  EXPECT_THROW(ops::linear_backward(dx, dw, none, bad_g, x, w), Error);
  try {
    ops::linear_forward(bad_out, x, w, b);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_forward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("out"), std::string::npos) << e.what();
  }
}
