// Block-scaled numerics (ops/blockscale/op.h) against their published definitions: OCP MX
// (E8M0 scales over 32 elements), NVFP4 (E2M1 values, E4M3 scales over 16, an fp32 tensor
// scale), Float8BlockScaling (fp32 scales per 1×128 / 128×128), stochastic rounding, and the
// random Hadamard transform.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "biofm/ops/blockscale/op.h"
#include "biofm/ops/gemm/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::ops;
using namespace biofm::testkit;

namespace {
Tensor fq(const Tensor& x, const BlockQuant& q) {
  Tensor out = Tensor::empty(x.shape(), DType::F32);
  cpu::block_fake_quantize(out, x, q);
  return out;
}
}  // namespace

// E2M1 (OCP MX spec, FP4): sign, 2 exponent bits (bias 1), 1 mantissa bit; values
// ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no inf/NaN codes.
TEST(OpsNvfp4, E2m1CodesAndRounding) {
  const float want[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 16; ++c) {
    const float v = e2m1_decode(uint8_t(c));
    EXPECT_EQ(std::fabs(v), want[c & 7]) << c;
    EXPECT_EQ(std::signbit(v), (c & 8) != 0) << c;
    EXPECT_EQ(e2m1_encode(v), uint8_t(c)) << c;  // every code round-trips (-0 included)
    EXPECT_EQ(e2m1_round(v), v);
  }
  EXPECT_EQ(e2m1_encode(1.0f), 0x2);  // exponent field 1 (bias 1), mantissa 0
  EXPECT_EQ(e2m1_encode(6.0f), 0x7);
  EXPECT_EQ(e2m1_encode(-0.5f), 0x9);  // the subnormal
  // Ties to the even mantissa; saturation at ±6.
  EXPECT_EQ(e2m1_round(0.25f), 0.0f);
  EXPECT_EQ(e2m1_round(0.75f), 1.0f);
  EXPECT_EQ(e2m1_round(1.25f), 1.0f);
  EXPECT_EQ(e2m1_round(1.75f), 2.0f);
  EXPECT_EQ(e2m1_round(2.5f), 2.0f);
  EXPECT_EQ(e2m1_round(3.5f), 4.0f);
  EXPECT_EQ(e2m1_round(5.0f), 4.0f);
  EXPECT_EQ(e2m1_round(5.1f), 6.0f);
  EXPECT_EQ(e2m1_round(-100.0f), -6.0f);
  EXPECT_EQ(e2m1_round(0.26f), 0.5f);
}

// E8M0 (OCP MX scale): 2^(code - 127), 0xFF NaN.
TEST(OpsMxfp8, E8m0Scales) {
  EXPECT_EQ(e8m0_decode(127), 1.0f);
  EXPECT_EQ(e8m0_decode(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_decode(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_decode(255)));
  EXPECT_EQ(e8m0_round_up(1.0f), 127);
  EXPECT_EQ(e8m0_round_up(1.5f), 128);  // up to 2
  EXPECT_EQ(e8m0_round_up(0.5f), 126);
  EXPECT_EQ(e8m0_round_up(0.0f), 0);
  EXPECT_EQ(e8m0_round_up(NAN), 255);
}

// MXFP8: a block of 32 whose amax is 448·2^3 has scale 2^3, so values that are E4M3 values
// times 8 come back exactly; a second block with other magnitudes gets its own scale; no
// element saturates (the scale rounds up).
TEST(OpsMxfp8, BlocksOf32KnownVectorsAndRoundTrip) {
  std::vector<float> v(64);
  for (int i = 0; i < 32; ++i) v[size_t(i)] = fp8_decode(uint8_t(0x30 + i), Fp8Type::E4M3) * 8.0f;  // representable × 8
  v[31] = 448.0f * 8.0f;
  for (int i = 32; i < 64; ++i) v[size_t(i)] = 0.001f * float(i - 40);
  Tensor x = Tensor::from_f32({2, 32}, v);
  BlockQuant q{BlockScaleKind::E8M0, Fp8Type::E4M3, 1, 32};
  Tensor y = fq(x, q);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y.f32()[i], v[size_t(i)]) << i;
  // Second block: amax 0.023 → scale 2^ceil(log2(0.023/448)) = 2^-14; each element is the E4M3
  // rounding of x·2^14, times 2^-14.
  for (int i = 32; i < 64; ++i)
    EXPECT_EQ(y.f32()[i], fp8_round(v[size_t(i)] * 16384.0f, Fp8Type::E4M3) / 16384.0f) << i;
  // Random data: never saturates, relative error within E4M3's half ulp (2^-4) per element
  // above the block's subnormal range.
  Tensor r = randn({8, 96}, 11, 3.0f);
  Tensor ry = fq(r, q);
  for (int64_t i = 0; i < r.numel(); ++i) EXPECT_LE(std::fabs(ry.f32()[i] - r.f32()[i]), std::fabs(r.f32()[i]) / 16 + 1e-3f);
}

// NVFP4 from its definition: S_enc = 448·6/amax, block scale s_b = e4m3(amax_b/6·S_enc),
// q = e2m1(x·S_enc/s_b), x̂ = q·s_b/S_enc.
TEST(OpsNvfp4, BlocksOf16FollowTheDefinition) {
  std::vector<float> v(32);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = 0.1f * float(i - 7);  // amax 0.8
  for (int i = 16; i < 32; ++i) v[size_t(i)] = 12.0f * float((i % 5) - 2) / 2.0f;  // amax 12 (tensor amax)
  Tensor x = Tensor::from_f32({1, 32}, v);
  Tensor y = fq(x, BlockQuant{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 1, 16});
  const float S = 448.0f * 6.0f / 12.0f;
  for (int b = 0; b < 2; ++b) {
    float amax = 0;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(v[size_t(b * 16 + i)]));
    const float sb = fp8_round(amax / 6.0f * S, Fp8Type::E4M3);
    for (int i = 0; i < 16; ++i) {
      const float xv = v[size_t(b * 16 + i)];
      EXPECT_EQ(y.f32()[b * 16 + i], e2m1_round(xv * (S / sb)) * (sb / S)) << b << " " << i;
    }
  }
  // The block holding the tensor amax maps it to exactly ±6 · s_b / S_enc = ±12.
  EXPECT_EQ(y.f32()[20], -12.0f);
  // Values on the E2M1 grid of a power-of-two-scaled block come back exactly.
  Tensor g = Tensor::from_f32({1, 16}, {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.5f, -1, -1.5f, -2, -3, -4, -6, 6});
  Tensor gy = fq(g, BlockQuant{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 1, 16});
  for (int i = 0; i < 16; ++i) EXPECT_EQ(gy.f32()[i], g.f32()[i]) << i;
  // 16×16 blocks share one scale over 16 rows: a row of tiny values next to big ones underflows
  // there but not in 1×16 blocks.
  Tensor m = Tensor::zeros({16, 16}, DType::F32);
  for (int c = 0; c < 16; ++c) m.f32()[c] = 100.0f, m.f32()[16 + c] = 0.01f;
  Tensor m1 = fq(m, BlockQuant{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 1, 16});
  Tensor m2 = fq(m, BlockQuant{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 16, 16});
  EXPECT_NEAR(m1.f32()[16], 0.01f, 0.002f);
  EXPECT_EQ(m2.f32()[16], 0.0f);
}

// Stochastic rounding: only the two neighbours, and unbiased on average.
TEST(OpsNvfp4, StochasticRoundingIsUnbiased) {
  const int n = 20000;
  std::vector<float> v(size_t(n), 0.0f);
  for (int i = 0; i < n; i += 16) v[size_t(i)] = 6.0f;  // each block's amax: scale exactly 1 per block
  for (int i = 0; i < n; ++i)
    if (i % 16) v[size_t(i)] = 2.3f;  // between E2M1 2 and 3 (p(3) = 0.3)
  Tensor x = Tensor::from_f32({1, n}, v);
  BlockQuant q{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 1, 16};
  q.stochastic = true;
  q.seed = 5;
  Tensor y = fq(x, q);
  double sum = 0;
  int count = 0;
  for (int i = 0; i < n; ++i)
    if (i % 16) {
      EXPECT_TRUE(y.f32()[i] == 2.0f || y.f32()[i] == 3.0f) << y.f32()[i];
      sum += y.f32()[i];
      ++count;
    }
  EXPECT_NEAR(sum / count, 2.3, 0.01);
  q.stochastic = false;
  EXPECT_EQ(fq(x, q).f32()[1], 2.0f);  // round to nearest
}

// Float8BlockScaling: scale = fp8_max / amax per block (fp32), rounded down to a power of two by
// default; 1×128 tiles vs 128×128 blocks.
TEST(OpsFp8BlockScaling, TileAndBlockScales) {
  Tensor x = randn({4, 256}, 3);
  x.f32()[5] = 40.0f;  // the first tile of row 0
  for (bool pow2 : {false, true}) {
    BlockQuant q{pow2 ? BlockScaleKind::F32Pow2 : BlockScaleKind::F32, Fp8Type::E4M3, 1, 128};
    Tensor y = fq(x, q);
    for (int r = 0; r < 4; ++r)
      for (int t = 0; t < 2; ++t) {
        float amax = 0;
        for (int c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(x.f32()[r * 256 + t * 128 + c]));
        float s = 448.0f / amax;
        if (pow2) s = std::ldexp(1.0f, int(std::floor(std::log2(s))));
        for (int c = 0; c < 128; ++c) {
          const int i = r * 256 + t * 128 + c;
          ASSERT_EQ(y.f32()[i], fp8_round(x.f32()[i] * s, Fp8Type::E4M3) * (1.0f / s)) << pow2 << " " << i;
        }
      }
  }
  // A 128×128 block: one scale for all rows, so row 1's elements see row 0's outlier.
  Tensor big = randn({128, 128}, 4);
  big.f32()[0] = 1000.0f;
  Tensor yb = fq(big, BlockQuant{BlockScaleKind::F32, Fp8Type::E4M3, 128, 128});
  const float s = 448.0f / 1000.0f;
  for (int i = 128; i < 256; ++i) ASSERT_EQ(yb.f32()[i], fp8_round(big.f32()[i] * s, Fp8Type::E4M3) * (1.0f / s));
}

// The random Hadamard transform is orthogonal: inner products along the rows are kept, which is
// why the weight gradient doutᵀ·x may be computed from both inputs transformed.
TEST(OpsNvfp4, HadamardTransformKeepsTheProduct) {
  Tensor a = randn({32, 5}, 7), b = randn({32, 3}, 8);
  Tensor ha = Tensor::empty(a.shape(), DType::F32), hb = Tensor::empty(b.shape(), DType::F32);
  cpu::hadamard16_rows(ha, a, 42);
  cpu::hadamard16_rows(hb, b, 42);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      double d = 0, dh = 0;
      for (int r = 0; r < 32; ++r) {
        d += double(a.f32()[r * 5 + i]) * b.f32()[r * 3 + j];
        dh += double(ha.f32()[r * 5 + i]) * hb.f32()[r * 3 + j];
      }
      EXPECT_NEAR(dh, d, 1e-4 * (1 + std::fabs(d)));
    }
  // It spreads an outlier: a one-hot column becomes ±1/4 in all 16 rows of its group.
  Tensor e = Tensor::zeros({16, 1}, DType::F32);
  e.f32()[3] = 1.0f;
  Tensor he = Tensor::empty({16, 1}, DType::F32);
  cpu::hadamard16_rows(he, e, 42);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(std::fabs(he.f32()[r]), 0.25f);
  Tensor odd = Tensor::zeros({10, 2}, DType::F32);
  EXPECT_THROW(cpu::hadamard16_rows(odd, odd, 1), Error);
}

// Float8BlockScaling codes for the native GEMMs (fp8_block_quantize): decoded, each form gives
// block_fake_quantize's values for its tiling (1×128 along C; 128×1 along R, transposed; 128×128
// for weights), the scales sit k-block-major, and padding rows are zero codes.
TEST(OpsFloat8BlockScaling, CodesDecodeToTheFakeQuantizedValues) {
  const int64_t R = 200, C = 256;  // R: one full and one partial tile of 128 rows
  Tensor x = randn({R, C}, 91, 3.0f);
  x.f32()[C + 7] = 1e4f;  // an outlier: only its own tiles get a small scale
  for (const Fp8Type t : {Fp8Type::E4M3, Fp8Type::E5M2})
    for (const bool pow2 : {true, false}) {
      const BlockScaleKind kind = pow2 ? BlockScaleKind::F32Pow2 : BlockScaleKind::F32;
      Fp8BlockCodes rows, cols;
      cpu::fp8_block_quantize(&rows, &cols, x, t, pow2, false);
      ASSERT_EQ(rows.codes.shape(), (Shape{R, C}));
      ASSERT_EQ(rows.scale_inv.shape(), (Shape{C / 128, R}));
      ASSERT_EQ(cols.codes.shape(), (Shape{C, 256}));
      ASSERT_EQ(cols.scale_inv.shape(), (Shape{2, C}));
      const Tensor want_rows = fq(x, {kind, t, 1, 128}), want_cols = fq(x, {kind, t, 128, 1});
      const uint8_t* rq = static_cast<const uint8_t*>(rows.codes.raw());
      const uint8_t* cq = static_cast<const uint8_t*>(cols.codes.raw());
      int64_t mismatches = 0;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
          const float vr = fp8_decode(rq[r * C + c], t) * rows.scale_inv.f32()[(c / 128) * R + r];
          const float vc = fp8_decode(cq[c * 256 + r], t) * cols.scale_inv.f32()[(r / 128) * C + c];
          mismatches += vr != want_rows.f32()[r * C + c];
          mismatches += vc != want_cols.f32()[r * C + c];
        }
      EXPECT_EQ(mismatches, 0) << fp8_type_name(t) << (pow2 ? " pow2" : " f32");
      for (int64_t c = 0; c < C; ++c)
        for (int64_t r = R; r < 256; ++r) ASSERT_EQ(cq[c * 256 + r], 0) << "padding row " << r;
      // The outlier's row tile has a much smaller scale than its neighbour row's.
      EXPECT_GT(rows.scale_inv.f32()[1], 100.0f * rows.scale_inv.f32()[0]);
    }
  // A row count that is not a multiple of 4: the first R4 rows' scales, then the last four's.
  {
    Tensor y = randn({203, 128}, 96, 3.0f);
    Fp8BlockCodes rows, cols;
    cpu::fp8_block_quantize(&rows, &cols, y, Fp8Type::E4M3, true, false);
    ASSERT_EQ(rows.scale_inv.shape(), (Shape{1, 200}));
    ASSERT_EQ(rows.tail_scale_inv.shape(), (Shape{1, 4}));
    const Tensor want = fq(y, {BlockScaleKind::F32Pow2, Fp8Type::E4M3, 1, 128});
    const uint8_t* q = static_cast<const uint8_t*>(rows.codes.raw());
    int64_t mismatches = 0;
    for (int64_t r = 0; r < 203; ++r) {
      const float s = r < 200 ? rows.scale_inv.f32()[r] : rows.tail_scale_inv.f32()[r - 199];
      if (r >= 199) mismatches += rows.tail_scale_inv.f32()[r - 199] != (r < 200 ? rows.scale_inv.f32()[r] : s);
      for (int64_t c = 0; c < 128; ++c) mismatches += fp8_decode(q[r * 128 + c], Fp8Type::E4M3) * s != want.f32()[r * 128 + c];
    }
    EXPECT_EQ(mismatches, 0);
    Fp8BlockCodes few;
    EXPECT_THROW(cpu::fp8_block_quantize(&few, nullptr, randn({3, 128}, 1), Fp8Type::E4M3, true, false), Error);
  }
  // Weights: one scale per 128×128 block, repeated per row in both forms.
  Tensor w = randn({256, 384}, 92, 0.05f);
  w.f32()[130 * 384 + 300] = 4.0f;  // block (1, 2)
  Fp8BlockCodes rows, cols;
  cpu::fp8_block_quantize(&rows, &cols, w, Fp8Type::E4M3, true, true);
  const Tensor want = fq(w, {BlockScaleKind::F32Pow2, Fp8Type::E4M3, 128, 128});
  const uint8_t* rq = static_cast<const uint8_t*>(rows.codes.raw());
  const uint8_t* cq = static_cast<const uint8_t*>(cols.codes.raw());
  int64_t mismatches = 0;
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t c = 0; c < 384; ++c) {
      const float block_scale = rows.scale_inv.f32()[(c / 128) * 256 + (r / 128) * 128];
      mismatches += rows.scale_inv.f32()[(c / 128) * 256 + r] != block_scale;
      mismatches += cols.scale_inv.f32()[(r / 128) * 384 + c] != block_scale;
      mismatches += fp8_decode(rq[r * 384 + c], Fp8Type::E4M3) * block_scale != want.f32()[r * 384 + c];
      mismatches += fp8_decode(cq[c * 256 + r], Fp8Type::E4M3) * block_scale != want.f32()[r * 384 + c];
    }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(rows.scale_inv.f32()[2 * 256 + 128], 10.0f * rows.scale_inv.f32()[2 * 256]);
  // Shapes the GEMMs cannot take are refused.
  Fp8BlockCodes bad;
  EXPECT_THROW(cpu::fp8_block_quantize(&bad, nullptr, randn({4, 100}, 1), Fp8Type::E4M3, true, false), Error);
  EXPECT_THROW(cpu::fp8_block_quantize(&bad, nullptr, randn({100, 128}, 1), Fp8Type::E4M3, true, true), Error);
}

// The Float8BlockScaling layer's reference: the emulation, exactly (the model's CPU path).
TEST(OpsFloat8BlockScaling, LinearReferenceIsTheEmulation) {
  const int64_t N = 10, I = 128, O = 256;
  Tensor x = randn({N, I}, 93), w = randn({O, I}, 94, 0.1f), b = randn({O}, 95), none;
  Fp8BlockRecipe r;
  Tensor out = Tensor::empty({N, O}, DType::F32), want = Tensor::empty({N, O}, DType::F32);
  linear_forward_fp8_block(out, x, w, b, none, r);
  linear_forward(want, fq(x, {BlockScaleKind::F32Pow2, Fp8Type::E4M3, 1, 128}),
                 fq(w, {BlockScaleKind::F32Pow2, Fp8Type::E4M3, 128, 128}), b, none);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.f32()[i], want.f32()[i]) << i;
  // and it is not the unquantized layer
  Tensor plain = Tensor::empty({N, O}, DType::F32);
  linear_forward(plain, x, w, b, none);
  double diff = 0;
  for (int64_t i = 0; i < out.numel(); ++i) diff = std::max(diff, double(std::fabs(out.f32()[i] - plain.f32()[i])));
  EXPECT_GT(diff, 1e-3);
}
