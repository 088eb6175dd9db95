// FP8 delayed scaling (ops/fp8/delayed.h): the CPU reference against Transformer Engine's
// DelayedScaling definition, written here independently as a window over the step amaxes
// (and fp8_quantize_gelu against the GELU written out):
//   the scale used at step t+1 = fp8_max · 2^-margin / A_t, where A_t is the max of the last
//   amax_history_len step amaxes (NaNs ignored) or, for most_recent, the amax of step t; a
//   non-finite or zero A_t keeps the previous scale; the first step's scale is 1.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "biofm/ops/fp8/delayed.h"
#include "biofm/ops/fp8/op.h"

using namespace biofm;
using namespace biofm::ops;

namespace {

// TE's formula over the sequence of step amaxes: the scale of each step (before its own amax).
std::vector<float> te_scales(const std::vector<float>& amaxes, int L, int margin, bool use_max, Fp8Type t) {
  std::vector<float> scales;
  float scale = 1.0f;
  for (size_t s = 0; s < amaxes.size(); ++s) {
    scales.push_back(scale);
    float A = amaxes[s];
    if (use_max) {
      A = 0.0f;
      for (size_t j = s + 1 >= size_t(L) ? s + 1 - size_t(L) : 0; j <= s; ++j) A = std::fmax(A, amaxes[j]);
    }
    if (std::isfinite(A) && A > 0.0f) scale = fp8_max(t) * std::pow(2.0f, float(-margin)) / A;
    if (std::isinf(scale)) scale = std::numeric_limits<float>::max();  // (TE clamps an fp32 overflow)
  }
  return scales;
}

// The same steps through the reference: record each step's amax, then update.
std::vector<float> ours(const std::vector<float>& amaxes, int L, int margin, bool use_max, Fp8Type t,
                        std::vector<float>* final_history = nullptr) {
  Tensor h = Tensor::zeros({1, L}, DType::F32);
  Tensor s = Tensor::from_f32({1}, {fp8_max(t)});  // scale 1
  std::vector<float> scales;
  for (float a : amaxes) {
    scales.push_back(fp8_scale_for(s.f32()[0], t));
    Tensor row = h.flat_slice(0, {L});
    Tensor given = Tensor::from_f32({1}, {a});
    fp8_amax_record(row, Tensor(), given);
    fp8_delayed_update(h, s, margin, use_max);
  }
  if (final_history) final_history->assign(h.f32(), h.f32() + L);
  return scales;
}

}  // namespace

TEST(OpsFp8Delayed, MatchesTransformerEngineOnHandMadeSequences) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> sequences = {
      {2.0f, 8.0f, 1.0f, 0.5f, 0.25f, 0.125f, 3.0f},
      {1.0f, 0.0f, 0.0f, 5.0f, 0.0f, 0.0f, 0.0f, 0.0f},  // zero amaxes keep the scale (most_recent)
      {3.0f, inf, 2.0f, 1.0f, 1.0f, 1.0f},                // an overflow keeps it while in the window
      {3.0f, nan, 2.0f, 7.0f},                            // NaN: ignored by max, kept-scale by most_recent
      {1e-30f, 1e-38f, 4e4f, 1e-3f},                      // tiny and large
  };
  for (Fp8Type t : {Fp8Type::E4M3, Fp8Type::E5M2})
    for (int L : {1, 2, 3, 16})
      for (int margin : {0, 2})
        for (bool use_max : {true, false})
          for (const auto& seq : sequences) {
            const std::vector<float> want = te_scales(seq, L, margin, use_max, t), got = ours(seq, L, margin, use_max, t);
            for (size_t i = 0; i < seq.size(); ++i)
              EXPECT_EQ(got[i], want[i]) << fp8_type_name(t) << " L=" << L << " margin=" << margin
                                         << (use_max ? " max" : " most_recent") << " step " << i;
          }
}

// The history itself rolls as Transformer Engine's kernel rolls it: slot 0 open for the step in
// progress, the completed steps in the other slots (the newest last).
TEST(OpsFp8Delayed, HistoryRollsAsTransformerEngines) {
  std::vector<float> h;
  ours({1.0f, 2.0f, 3.0f, 4.0f, 5.0f}, 3, 0, true, Fp8Type::E4M3, &h);
  EXPECT_EQ(h, (std::vector<float>{0.0f, 4.0f, 5.0f}));
  ours({1.0f, 2.0f}, 4, 0, true, Fp8Type::E4M3, &h);
  EXPECT_EQ(h, (std::vector<float>{0.0f, 0.0f, 1.0f, 2.0f}));
  ours({7.0f}, 1, 0, true, Fp8Type::E4M3, &h);
  EXPECT_EQ(h, (std::vector<float>{0.0f}));
}

// Recording folds max |x| (or a producer's amax) into slot 0 only; micro batches of a step
// accumulate by max; rows are independent in one update.
TEST(OpsFp8Delayed, RecordFoldsTheStepsMaxIntoSlotZero) {
  Tensor h = Tensor::zeros({2, 3}, DType::F32);
  Tensor s = Tensor::from_f32({2}, {448.0f, 448.0f});
  Tensor r0 = h.flat_slice(0, {3}), r1 = h.flat_slice(3, {3});
  fp8_amax_record(r0, Tensor::from_f32({4}, {1.0f, -6.0f, 2.0f, 0.5f}));
  fp8_amax_record(r0, Tensor::from_f32({2}, {3.0f, -4.0f}));  // a second micro batch: smaller
  fp8_amax_record(r1, Tensor(), Tensor::from_f32({1}, {0.25f}));
  EXPECT_EQ(h.f32()[0], 6.0f);
  EXPECT_EQ(h.f32()[1], 0.0f);
  EXPECT_EQ(h.f32()[3], 0.25f);
  fp8_delayed_update(h, s, 1, true);
  EXPECT_EQ(s.f32()[0], 12.0f);  // amax·2^margin: scale 448/12 = 448·2^-1/6
  EXPECT_EQ(s.f32()[1], 0.5f);
  EXPECT_EQ(fp8_scale_for(s.f32()[0], Fp8Type::E4M3), 448.0f * 0.5f / 6.0f);
  EXPECT_EQ(h.f32()[0], 0.0f);
  EXPECT_EQ(h.f32()[2], 6.0f);
  EXPECT_THROW(fp8_delayed_update(h, s, -1, true), Error);
  Tensor bad = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(fp8_delayed_update(h, bad, 0, true), Error);
}

// fp8_quantize's `record`: the weight's amax folded into its history slot in the quantization's
// own pass, as fp8_amax_record would (a smaller max leaves the slot; a NaN wins; bad rows throw).
TEST(OpsFp8Delayed, QuantizeRecordsTheAmaxIntoTheHistory) {
  const Tensor x = Tensor::from_f32({2, 16}, std::vector<float>{1.0f, -9.0f, 2.0f, 0.5f, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                0, 0, 0, 3.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                0, -4.0f});
  Tensor h = Tensor::from_f32({2}, {2.0f, 7.0f});
  Tensor q = Tensor::empty({2, 16}, DType::U8), none, s = Tensor::empty({1}, DType::F32);
  fp8_quantize(q, none, s, x, Fp8Type::E4M3, Tensor::from_f32({1}, {448.0f}), Tensor(), h);
  EXPECT_EQ(h.f32()[0], 9.0f);
  EXPECT_EQ(h.f32()[1], 7.0f);  // only slot 0
  EXPECT_EQ(fp8_decode(static_cast<uint8_t*>(q.raw())[1], Fp8Type::E4M3), -9.0f);  // (scale 1)
  Tensor big = Tensor::from_f32({1}, {20.0f});
  fp8_quantize(q, none, s, x, Fp8Type::E4M3, Tensor(), Tensor(), big);
  EXPECT_EQ(big.f32()[0], 20.0f);
  Tensor xn = x.clone();
  xn.f32()[5] = std::nanf("");
  fp8_quantize(q, none, s, xn, Fp8Type::E4M3, Tensor::from_f32({1}, {448.0f}), Tensor(), h);
  EXPECT_TRUE(std::isnan(h.f32()[0]));
  Tensor bad = Tensor::zeros({1}, DType::BF16);
  EXPECT_THROW(fp8_quantize(q, none, s, x, Fp8Type::E4M3, Tensor(), Tensor(), bad), Error);
}

// fp8_quantize_gelu (the ESM-2 MLP's GELU inside the quantization, for DelayedScaling) against
// the GELU written out here: x·Φ(x) forward, dact·(Φ(x) + x·φ(x)) backward, each value
// quantized with the given scale; the amax it folds into the history row (slot 0 only, not
// zeroed: a larger earlier value stays) and the column sums of what it quantized.
TEST(OpsFp8Delayed, GeluCodesQuantizeTheGeluWithTheGivenScale) {
  const int64_t R = 5, C = 16;
  std::vector<float> pre(size_t(R * C)), dact(size_t(R * C));
  for (size_t i = 0; i < pre.size(); ++i) {
    pre[i] = -4.0f + 8.0f * float(i) / float(pre.size());
    dact[i] = 0.01f * float(int(i % 7) - 3);
  }
  const Tensor P = Tensor::from_f32({R, C}, pre), D = Tensor::from_f32({R, C}, dact);
  for (bool grad : {false, true}) {
    const Fp8Type t = grad ? Fp8Type::E5M2 : Fp8Type::E4M3;
    const float scale_amax = grad ? 0.02f : 2.0f;  // (some values saturate)
    Tensor q = Tensor::empty({R, C}, DType::U8), qt = Tensor::empty({C, 16}, DType::U8);
    Tensor s = Tensor::empty({1}, DType::F32), record = Tensor::from_f32({3}, {1e-4f, 5.0f, 6.0f});
    Tensor sums = Tensor::zeros({C}, DType::F32);
    fp8_quantize_gelu(q, qt, s, P, grad ? D : Tensor(), t, Tensor::from_f32({1}, {scale_amax}), record, sums);
    const float scale = fp8_max(t) / scale_amax;
    EXPECT_FLOAT_EQ(s.f32()[0], 1.0f / scale);
    float amax = 0.0f;
    std::vector<double> col(size_t(C), 0.0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const double x = pre[size_t(r * C + c)], cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
        const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
        const float v = float(grad ? dact[size_t(r * C + c)] * (cdf + x * pdf) : x * cdf);
        amax = std::fmax(amax, std::fabs(v));
        col[size_t(c)] += v;
        const uint8_t code = static_cast<const uint8_t*>(q.raw())[r * C + c];
        // (within half a code step of v·scale, saturated: the GELU here is computed in double)
        const float want = std::fmin(std::fmax(v * scale, -fp8_max(t)), fp8_max(t));
        const float half_step = (t == Fp8Type::E4M3 ? 0.0625f : 0.125f) * std::fabs(want) + 0.002f;
        EXPECT_NEAR(fp8_decode(code, t), want, half_step) << (grad ? "backward " : "forward ") << r << "," << c;
        EXPECT_EQ(static_cast<const uint8_t*>(qt.raw())[c * 16 + r], code);
      }
    EXPECT_NEAR(record.f32()[0], amax, 1e-6f * amax);
    EXPECT_EQ(record.f32()[1], 5.0f);
    EXPECT_EQ(record.f32()[2], 6.0f);
    for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(sums.f32()[c], col[size_t(c)], 1e-5) << c;
    Tensor larger = Tensor::from_f32({1}, {1e3f});  // an earlier micro batch's larger amax stays
    fp8_quantize_gelu(q, qt, s, P, grad ? D : Tensor(), t, Tensor::from_f32({1}, {scale_amax}), larger);
    EXPECT_EQ(larger.f32()[0], 1e3f);
  }
  // The delayed scale and the amax output are required.
  Tensor q = Tensor::empty({R, C}, DType::U8), none, s = Tensor::empty({1}, DType::F32);
  EXPECT_THROW(fp8_quantize_gelu(q, none, s, P, Tensor(), Fp8Type::E4M3, Tensor(), Tensor::empty({1}, DType::F32)),
               std::exception);
}
