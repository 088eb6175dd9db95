// The FP8 formats (OCP E4M3 / E5M2), per-tensor current-scaling quantization, and the FP8
// linear layer reference on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "biofm/ops/fp8/op.h"
#include "biofm/ops/fp8/stats.h"
#include "biofm/ops/gemm/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::ops;
using namespace biofm::testkit;

namespace {
// ||a - b|| / ||b||.
double rel_error(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.f32()[i]) - b.f32()[i];
    num += d * d;
    den += double(b.f32()[i]) * b.f32()[i];
  }
  return std::sqrt(num / den);
}
}  // namespace

TEST(OpsFp8, KnownCodes) {
  EXPECT_EQ(fp8_encode(1.0f, Fp8Type::E4M3), 0x38);  // exponent 7 (bias 7), fraction 0
  EXPECT_EQ(fp8_encode(448.0f, Fp8Type::E4M3), 0x7e);
  EXPECT_EQ(fp8_encode(-2.0f, Fp8Type::E4M3), 0xc0);
  EXPECT_EQ(fp8_encode(std::ldexp(1.0f, -9), Fp8Type::E4M3), 0x01);  // smallest subnormal
  EXPECT_EQ(fp8_encode(1.0f, Fp8Type::E5M2), 0x3c);
  EXPECT_EQ(fp8_encode(57344.0f, Fp8Type::E5M2), 0x7b);
  EXPECT_EQ(fp8_encode(std::ldexp(1.0f, -16), Fp8Type::E5M2), 0x01);
  EXPECT_EQ(fp8_max(Fp8Type::E4M3), 448.0f);
  EXPECT_EQ(fp8_max(Fp8Type::E5M2), 57344.0f);
  EXPECT_TRUE(std::isnan(fp8_decode(0x7f, Fp8Type::E4M3)));
  EXPECT_TRUE(std::isnan(fp8_decode(0x7f, Fp8Type::E5M2)));
  EXPECT_TRUE(std::isinf(fp8_decode(0x7c, Fp8Type::E5M2)));
  // Non-finite inputs are passed on as NaN, not clamped.
  for (Fp8Type t : {Fp8Type::E4M3, Fp8Type::E5M2}) {
    EXPECT_EQ(fp8_encode(INFINITY, t), 0x7f);
    EXPECT_EQ(fp8_encode(-INFINITY, t), 0x7f);
    EXPECT_TRUE(std::isnan(fp8_round(INFINITY, t)));
  }
}

// Every finite code decodes to a value that encodes back to the same code.
TEST(OpsFp8, EveryFiniteCodeRoundTrips) {
  for (Fp8Type t : {Fp8Type::E4M3, Fp8Type::E5M2}) {
    int finite = 0;
    for (int c = 0; c < 256; ++c) {
      const float v = fp8_decode(uint8_t(c), t);
      if (!std::isfinite(v)) continue;
      ++finite;
      EXPECT_EQ(fp8_encode(v, t), uint8_t(c)) << fp8_type_name(t) << " code " << c << " value " << v;
      EXPECT_EQ(fp8_round(v, t), v);
    }
    EXPECT_EQ(finite, t == Fp8Type::E4M3 ? 254 : 248) << fp8_type_name(t);  // E4M3: 2 NaNs; E5M2: 2 inf, 6 NaN
  }
}

TEST(OpsFp8, RoundsToNearestEvenAndSaturates) {
  // E4M3 steps are 1/8 in [1, 2): 1.0625 ties to 1.0 (even), 1.1875 ties to 1.25 (even).
  EXPECT_EQ(fp8_round(1.0625f, Fp8Type::E4M3), 1.0f);
  EXPECT_EQ(fp8_round(1.1875f, Fp8Type::E4M3), 1.25f);
  EXPECT_EQ(fp8_round(1.07f, Fp8Type::E4M3), 1.125f);
  EXPECT_EQ(fp8_round(-1.07f, Fp8Type::E4M3), -1.125f);
  // E5M2 steps are 1/4 in [1, 2).
  EXPECT_EQ(fp8_round(1.125f, Fp8Type::E5M2), 1.0f);
  EXPECT_EQ(fp8_round(1.375f, Fp8Type::E5M2), 1.5f);
  // Saturation instead of overflow.
  EXPECT_EQ(fp8_round(1000.0f, Fp8Type::E4M3), 448.0f);
  EXPECT_EQ(fp8_round(-1e30f, Fp8Type::E4M3), -448.0f);
  EXPECT_EQ(fp8_round(470.0f, Fp8Type::E4M3), 448.0f);
  EXPECT_EQ(fp8_round(1e9f, Fp8Type::E5M2), 57344.0f);
  // Subnormals: half the smallest E4M3 subnormal ties to 0; 0.75 of it rounds up.
  EXPECT_EQ(fp8_round(std::ldexp(1.0f, -10), Fp8Type::E4M3), 0.0f);
  EXPECT_EQ(fp8_round(0.75f * std::ldexp(1.0f, -9), Fp8Type::E4M3), std::ldexp(1.0f, -9));
  // Relative error within half a step for normal values.
  Tensor v = randn({4096}, 5, 10.0f);
  for (int64_t i = 0; i < v.numel(); ++i) {
    const float x = v.f32()[i];
    if (std::fabs(x) < 0.02f) continue;  // E4M3 normals start at 2^-6
    EXPECT_LE(std::fabs(fp8_round(x, Fp8Type::E4M3) - x), std::fabs(x) / 16.0f + 1e-7f) << x;
    EXPECT_LE(std::fabs(fp8_round(x, Fp8Type::E5M2) - x), std::fabs(x) / 8.0f + 1e-7f) << x;
  }
}

// The scale maps amax onto the format's max; the transposed codes are the row-major codes
// transposed, padded with zero codes; fake quantization is code · scale_inv.
// FP8 statistics: an overflow is a value that rounds past the format's max (saturated), not the
// tensor's own amax element, which fp32 scales land a rounding above the max under current
// scaling (448.00002 counted one overflow per tensor).
TEST(OpsFp8, OverflowsAreValuesThatSaturate) {
  EXPECT_EQ(fp8_overflow_bound(Fp8Type::E4M3), 464.0f);
  EXPECT_EQ(fp8_overflow_bound(Fp8Type::E5M2), 61440.0f);
  Tensor x = randn({4096}, 11, 0.5f);  // (|x| < 3 here)
  x.f32()[17] = 3.1770737f;  // the amax: scale 448 / 3.1770737 puts it at 448.00002 in fp32
  const QuantTensorStats current = fp8_tensor_stats(x, Fp8Type::E4M3, -1.0f);
  EXPECT_FLOAT_EQ(current.amax, 3.1770737f);
  EXPECT_EQ(current.overflows, 0);
  // A scale from a smaller (delayed) amax: the values beyond 464 / scale saturate.
  const QuantTensorStats delayed = fp8_tensor_stats(x, Fp8Type::E4M3, 1.0f);
  int64_t beyond = 0;
  for (int64_t i = 0; i < x.numel(); ++i) beyond += std::fabs(x.f32()[i] * delayed.scale) > 464.0f;
  EXPECT_GT(beyond, 0);
  EXPECT_EQ(delayed.overflows, beyond);
}

TEST(OpsFp8, QuantizeCurrentScaling) {
  const int64_t R = 21, C = 16, Rp = 32;
  Tensor x = randn({R, C}, 9, 3.0f);
  x.f32()[17] = -50.0f;  // amax
  Tensor q = Tensor::empty({R, C}, DType::U8), qt = Tensor::empty({C, Rp}, DType::U8);
  Tensor sinv = Tensor::empty({1}, DType::F32);
  ops::fp8_quantize(q, qt, sinv, x, Fp8Type::E4M3);
  EXPECT_FLOAT_EQ(sinv.f32()[0], 1.0f / (448.0f / 50.0f));
  const uint8_t* qp = static_cast<const uint8_t*>(q.raw());
  const uint8_t* qtp = static_cast<const uint8_t*>(qt.raw());
  EXPECT_EQ(qp[17], fp8_encode(-448.0f, Fp8Type::E4M3));
  Tensor fake = Tensor::empty({R, C}, DType::F32);
  cpu::fp8_fake_quantize(fake, x, Fp8Type::E4M3);
  for (int64_t r = 0; r < Rp; ++r)
    for (int64_t c = 0; c < C; ++c) {
      if (r >= R) {
        EXPECT_EQ(qtp[c * Rp + r], 0);
        continue;
      }
      EXPECT_EQ(qtp[c * Rp + r], qp[r * C + c]);
      EXPECT_EQ(fake.f32()[r * C + c], fp8_decode(qp[r * C + c], Fp8Type::E4M3) * sinv.f32()[0]);
    }
  // col_sums: += the column sums of x as given (not of the codes).
  Tensor sums = Tensor::empty({C}, DType::F32), no_codes;
  for (int64_t c = 0; c < C; ++c) sums.f32()[c] = float(c);
  ops::fp8_quantize(no_codes, no_codes, sinv, x, Fp8Type::E5M2, Tensor(), sums);
  for (int64_t c = 0; c < C; ++c) {
    double want = c;
    for (int64_t r = 0; r < R; ++r) want += x.f32()[r * C + c];
    EXPECT_NEAR(sums.f32()[c], want, 1e-4) << c;
  }
  EXPECT_THROW(ops::fp8_quantize(no_codes, no_codes, sinv, x, Fp8Type::E5M2, Tensor(), Tensor::empty({C + 1}, DType::F32)),
               Error);
  // An all-zero tensor keeps scale 1 (no division by zero).
  Tensor z = Tensor::zeros({4, 16}, DType::F32), none;
  ops::fp8_quantize(none, none, sinv, z, Fp8Type::E5M2);
  EXPECT_EQ(sinv.f32()[0], 1.0f);
}

// The FP8 linear layer is the fp32 layer on quantized operands: close to fp32 (within FP8's
// resolution) and, for the bias gradient, exactly the fp32 column sums of the unquantized dout.
TEST(OpsFp8, LinearReferenceIsCloseToFp32) {
  const int64_t N = 37, I = 32, O = 48;
  Tensor x = randn({N, I}, 11), w = randn({O, I}, 12, 0.2f), b = randn({O}, 13), res = randn({N, O}, 14);
  Tensor ref = Tensor::empty({N, O}, DType::F32), out = Tensor::empty({N, O}, DType::F32);
  ops::linear_forward(ref, x, w, b, res);
  ops::linear_forward_fp8(out, x, w, b, res, Fp8Recipe{});
  // E4M3 keeps 3 fraction bits: about 2-3% relative error per product, less after the sums.
  const double e_out = rel_error(out, ref);
  std::printf("fp8 vs fp32 relative error: out %.4f", e_out);
  EXPECT_LT(e_out, 0.05);
  EXPECT_GT(e_out, 1e-3) << "the FP8 path should not be exact";

  Tensor dout = randn({N, O}, 15, 1e-3f);  // gradients are small: the scale handles that
  Tensor dx_ref = Tensor::empty({N, I}, DType::F32), dx = Tensor::empty({N, I}, DType::F32);
  Tensor dw_ref = Tensor::zeros({O, I}, DType::F32), dw = Tensor::zeros({O, I}, DType::F32);
  Tensor db_ref = Tensor::zeros({O}, DType::F32), db = Tensor::zeros({O}, DType::F32);
  ops::linear_backward(dx_ref, dw_ref, db_ref, dout, x, w);
  ops::linear_backward_fp8(dx, dw, db, dout, x, w, Fp8Recipe{});
  // E5M2 gradients keep 2 fraction bits.
  const double e_dx = rel_error(dx, dx_ref), e_dw = rel_error(dw, dw_ref);
  std::printf(", dx %.4f, dw %.4f\n", e_dx, e_dw);
  EXPECT_LT(e_dx, 0.08);
  EXPECT_LT(e_dw, 0.08);
  EXPECT_TRUE(tensors_close(db, db_ref, 0.0, 0.0));
}
