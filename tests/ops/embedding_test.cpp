#include <gtest/gtest.h>

#include "biofm/ops/embedding/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

TEST(OpsEmbedding, ForwardGathersRows) {
  Tensor table = randn({6, 4}, 1);
  Tensor ids = Tensor::from_i32({5}, {3, 0, 5, 3, 1});
  Tensor out = Tensor::empty({5, 4}, DType::F32);
  ops::embedding_forward(out, ids, table);
  for (int n = 0; n < 5; ++n)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(out.f32()[n * 4 + c], table.f32()[ids.i32()[n] * 4 + c]);
}

TEST(OpsEmbedding, BackwardGradFDRepeatedIds) {
  const int64_t V = 7, C = 5;
  Tensor table = randn({V, C}, 2);
  Tensor ids = Tensor::from_i32({9}, {2, 4, 2, 0, 6, 2, 4, 1, 6});  // 2 three times, 3 and 5 never
  Tensor R = randn({9, C}, 3);
  Tensor out = Tensor::empty({9, C}, DType::F32);
  auto objective = [&] {
    ops::embedding_forward(out, ids, table);
    return dot(out, R);
  };
  Tensor dtable = Tensor::zeros({V, C}, DType::F32);
  ops::embedding_backward(dtable, R, ids);
  EXPECT_TRUE(fd_check("dtable", objective, table, dtable));
  // Unused rows get exactly zero; a second call accumulates.
  for (int c = 0; c < C; ++c) EXPECT_EQ(dtable.f32()[3 * C + c], 0.0f);
  Tensor once = dtable.clone();
  ops::embedding_backward(dtable, R, ids);
  for (int64_t i = 0; i < dtable.numel(); ++i) EXPECT_FLOAT_EQ(dtable.f32()[i], 2 * once.f32()[i]);
}

TEST(OpsEmbedding, BackwardManyRowsThreaded) {
  const int64_t V = 33, C = 64, N = 2000;
  std::vector<int32_t> idv(N);
  for (int64_t n = 0; n < N; ++n) idv[size_t(n)] = int32_t((n * 7) % V);
  Tensor ids = Tensor::from_i32({N}, idv);
  Tensor g = randn({N, C}, 4);
  Tensor dtable = Tensor::zeros({V, C}, DType::F32);
  ops::embedding_backward(dtable, g, ids);
  std::vector<double> ref(size_t(V * C), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) ref[size_t(idv[size_t(n)] * C + c)] += g.f32()[n * C + c];
  for (int64_t i = 0; i < V * C; ++i) EXPECT_NEAR(dtable.f32()[i], ref[size_t(i)], 1e-4);
}

TEST(OpsEmbedding, IdOutOfRangeThrows) {
  Tensor table = randn({6, 4}, 1);
  Tensor out = Tensor::empty({3, 4}, DType::F32);
  Tensor big = Tensor::from_i32({3}, {0, 6, 1}), neg = Tensor::from_i32({3}, {0, -1, 1});
  EXPECT_THROW(ops::embedding_forward(out, big, table), Error);
  EXPECT_THROW(ops::embedding_forward(out, neg, table), Error);
  Tensor dtable = Tensor::zeros({6, 4}, DType::F32);
  EXPECT_THROW(ops::embedding_backward(dtable, out, big), Error);
  // Nothing was written before the throw.
  EXPECT_EQ(max_abs(dtable), 0.0);
  Tensor ok = Tensor::from_i32({3}, {0, 5, 1});
  Tensor bad_out = Tensor::empty({3, 5}, DType::F32);
  EXPECT_THROW(ops::embedding_forward(bad_out, ok, table), Error);
  Tensor fids = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(ops::embedding_forward(out, fids, table), Error);
}

// FACTS.md: rows at <mask> become 0, then the sequence is scaled by
// (1 - 0.15·0.8) / (1 - n_mask/L) with L the real tokens; padding rows become 0.
TEST(OpsEmbedding, TokenDropoutHandExample) {
  const int32_t M = 32;
  // Sequence 0: 5 tokens, 2 masks, in a slot of 6 (one pad row). Sequence 1: 4 tokens, 1 mask.
  // Sequence 2: 3 tokens, no mask.
  Tensor ids = Tensor::from_i32({13}, {0, 5, M, 7, M, 1, 0, M, 9, 2, 0, 4, 2});
  Tensor cu = Tensor::from_i32({4}, {0, 6, 10, 13});
  Tensor lens = Tensor::from_i32({3}, {5, 4, 3});
  const int64_t C = 3;
  Tensor h = rand_uniform({13, C}, 5, 0.5f, 1.5f);
  Tensor h0 = h.clone();
  Tensor scale = Tensor::empty({13}, DType::F32);
  ops::esm_token_dropout_forward(h, scale, ids, cu, lens, M);
  const float f0 = 0.88f / (1.0f - 2.0f / 5.0f);  // 1.4666…
  const float f1 = 0.88f / (1.0f - 1.0f / 4.0f);  // 1.1733…
  const float f2 = 0.88f;
  const std::vector<float> expect = {f0, f0, 0, f0, 0, 0, f1, 0, f1, f1, f2, f2, f2};
  for (int n = 0; n < 13; ++n) {
    EXPECT_NEAR(scale.f32()[n], expect[size_t(n)], 1e-6) << "row " << n;
    for (int c = 0; c < C; ++c)
      EXPECT_NEAR(h.f32()[n * C + c], h0.f32()[n * C + c] * expect[size_t(n)], 1e-6);
  }
  EXPECT_NEAR(f0, 1.4666667f, 1e-6);
  // mask_id < 0 switches the dropout off: real rows keep factor 1, padding still becomes 0.
  Tensor h2 = h0.clone();
  ops::esm_token_dropout_forward(h2, scale, ids, cu, lens, -1);
  for (int n = 0; n < 13; ++n) EXPECT_EQ(scale.f32()[n], n == 5 ? 0.0f : 1.0f);
  for (int c = 0; c < C; ++c) EXPECT_EQ(h2.f32()[5 * C + c], 0.0f);
  EXPECT_EQ(h2.f32()[7 * C], h0.f32()[7 * C]);
}

TEST(OpsEmbedding, TokenDropoutGradFD) {
  // embedding → token dropout; backward = scale_rows_inplace then embedding_backward.
  const int32_t M = 6;
  const int64_t V = 7, C = 4;
  Tensor table = randn({V, C}, 6);
  Tensor ids = Tensor::from_i32({10}, {0, 2, M, 3, 2, 1, 0, M, M, 4});
  Tensor cu = Tensor::from_i32({3}, {0, 6, 10});
  Tensor lens = Tensor::from_i32({2}, {5, 4});
  Tensor R = randn({10, C}, 7);
  Tensor h = Tensor::empty({10, C}, DType::F32), scale = Tensor::empty({10}, DType::F32);
  auto objective = [&] {
    ops::embedding_forward(h, ids, table);
    ops::esm_token_dropout_forward(h, scale, ids, cu, lens, M);
    return dot(h, R);
  };
  objective();
  Tensor dh = R.clone();
  ops::scale_rows_inplace(dh, scale);
  Tensor dtable = Tensor::zeros({V, C}, DType::F32);
  ops::embedding_backward(dtable, dh, ids);
  EXPECT_TRUE(fd_check("dtable", objective, table, dtable));
  // The mask row of the table gets no gradient (every <mask> row is zeroed).
  for (int c = 0; c < C; ++c) EXPECT_EQ(dtable.f32()[M * C + c], 0.0f);
}

TEST(OpsEmbedding, TokenDropoutBadLayoutThrows) {
  Tensor ids = Tensor::from_i32({4}, {0, 1, 2, 3});
  Tensor h = randn({4, 2}, 1), scale = Tensor::empty({4}, DType::F32);
  Tensor cu = Tensor::from_i32({2}, {0, 4});
  Tensor too_long = Tensor::from_i32({1}, {5});
  Tensor past_end = Tensor::from_i32({2}, {0, 5});
  Tensor four = Tensor::from_i32({1}, {4});
  EXPECT_THROW(ops::esm_token_dropout_forward(h, scale, ids, cu, too_long, 32), Error);
  EXPECT_THROW(ops::esm_token_dropout_forward(h, scale, ids, past_end, four, 32), Error);
  Tensor bad_scale = Tensor::empty({3}, DType::F32);
  EXPECT_THROW(ops::esm_token_dropout_forward(h, bad_scale, ids, cu, four, 32), Error);
  EXPECT_THROW(ops::scale_rows_inplace(h, bad_scale), Error);
}
