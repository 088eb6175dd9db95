// ops::attention_{forward,backward}_packed_rows (context parallelism's share attention), CPU:
// some of a batch's query rows against the whole batch give those rows of the whole batch's
// attention (attention_forward_packed); their backward gives those rows' dq, and their
// contributions to dk and dv, which summed over shares that cover the batch are the whole
// batch's dk, dv. Padded slots, a padding row after the last sequence, GQA, causal or not.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "biofm/ops/attention/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

namespace {

constexpr int64_t Hq = 4, Hkv = 2, D = 8, W = (Hq + 2 * Hkv) * D;

// Sequences of 5, 1 and 7 tokens in slots of 6, 1 and 8 rows, then one row past the last slot.
const std::vector<int32_t> kLens{5, 1, 7}, kCu{0, 6, 7, 15};
constexpr int64_t N = 16;

ops::AttentionShape shape_of(bool causal) {
  ops::AttentionShape a;
  a.scale = 1.0f / std::sqrt(float(D));
  a.causal = causal;
  a.max_seqlen = 7;
  return a;
}

// Row r of a [rows, cols] tensor.
const float* row(const Tensor& t, int64_t r) { return t.f32() + r * (t.numel() / t.size(0)); }

}  // namespace

TEST(OpsAttentionRows, SharesOfABatchGiveItsAttentionAndGradients) {
  const Tensor cu = Tensor::from_i32({4}, kCu), lens = Tensor::from_i32({3}, kLens);
  const Tensor qkv = randn({N, W}, 11);
  const ops::QkvHeads heads{Hq, Hkv, D};
  // Two shares covering every row once (real and padding rows, out of order).
  const std::vector<std::vector<int32_t>> shares{{0, 14, 3, 6, 15, 9, 1, 12}, {2, 4, 5, 7, 8, 10, 11, 13}};
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    const ops::AttentionShape a = shape_of(causal);
    Tensor out = Tensor::empty({N, Hq, D}, DType::F32), lse = Tensor::empty({N, Hq}, DType::F32);
    ops::attention_forward_packed(out, lse, qkv, heads, cu, lens, a);
    const Tensor dout = randn({N, Hq, D}, 12);
    Tensor dqkv = Tensor::empty({N, W}, DType::F32);
    ops::attention_backward_packed(dqkv, dout, qkv, heads, out, lse, cu, lens, a);

    Tensor dkv_sum = Tensor::zeros({N, W}, DType::F32);
    for (const auto& share : shares) {
      const int64_t T = int64_t(share.size());
      const Tensor rows = Tensor::from_i32({T}, share);
      Tensor o = Tensor::empty({T, Hq, D}, DType::F32), l = Tensor::empty({T, Hq}, DType::F32);
      ops::attention_forward_packed_rows(o, l, qkv, heads, rows, cu, lens, a);
      Tensor g = Tensor::empty({T, Hq, D}, DType::F32);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < Hq * D; ++c) {
          EXPECT_NEAR(row(o, t)[c], row(out, share[size_t(t)])[c], 1e-5) << "out of row " << share[size_t(t)];
          g.f32()[t * Hq * D + c] = row(dout, share[size_t(t)])[c];
        }
        for (int64_t h = 0; h < Hq; ++h) EXPECT_NEAR(row(l, t)[h], row(lse, share[size_t(t)])[h], 1e-5);
      }
      Tensor dq_rows = Tensor::empty({T, W}, DType::F32), dkv = Tensor::empty({N, W}, DType::F32);
      ops::attention_backward_packed_rows(dq_rows, dkv, g, qkv, heads, o, l, rows, cu, lens, a);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < W; ++c) {
          const float want = c < Hq * D ? row(dqkv, share[size_t(t)])[c] : 0.0f;  // dq only
          EXPECT_NEAR(row(dq_rows, t)[c], want, 1e-5) << "dq_rows of row " << share[size_t(t)] << " col " << c;
        }
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < Hq * D; ++c) EXPECT_EQ(row(dkv, r)[c], 0.0f) << "dkv's q parts stay zero";
      for (int64_t i = 0; i < N * W; ++i) dkv_sum.f32()[i] += dkv.f32()[i];
    }
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = Hq * D; c < W; ++c)
        EXPECT_NEAR(row(dkv_sum, r)[c], row(dqkv, r)[c], 1e-5) << "dk|dv of row " << r << " col " << c;
  }
}

TEST(OpsAttentionRows, RowsOutsideTheBatchAreRefused) {
  const Tensor cu = Tensor::from_i32({4}, kCu), lens = Tensor::from_i32({3}, kLens);
  const Tensor qkv = randn({N, W}, 13);
  Tensor o = Tensor::empty({1, Hq, D}, DType::F32), l = Tensor::empty({1, Hq}, DType::F32);
  const Tensor bad = Tensor::from_i32({1}, {int32_t(N)});
  EXPECT_THROW(ops::attention_forward_packed_rows(o, l, qkv, ops::QkvHeads{Hq, Hkv, D}, bad, cu, lens, shape_of(false)),
               std::exception);
}
