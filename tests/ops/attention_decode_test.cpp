// attention_decode (CPU): the new rows of a sequence against its key/value cache equal the
// last rows of the full causal attention op over the whole sequence.
#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/attention/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

namespace {

// A cache of `capacity` rows whose rows [0, L) are `src` [L, H, D] and the rest NaN (never read).
Tensor make_cache(const Tensor& src, int64_t capacity) {
  const int64_t L = src.size(0), H = src.size(1), D = src.size(2);
  Tensor c = Tensor::empty({capacity, H, D}, DType::F32);
  c.fill_(std::nanf(""));
  c.narrow0(0, L).copy_from(src);
  return c;
}

// Sequence of L tokens; decode its last n_new rows (q_start_pos = L - n_new, cache_len = L).
void check_against_full(int64_t L, int64_t n_new, int64_t Hq, int64_t Hkv, int64_t D, uint64_t seed) {
  SCOPED_TRACE("L " + std::to_string(L) + " n_new " + std::to_string(n_new) + " Hq " +
               std::to_string(Hq) + " Hkv " + std::to_string(Hkv) + " D " + std::to_string(D));
  Tensor q = randn({L, Hq, D}, seed), k = randn({L, Hkv, D}, seed + 1), v = randn({L, Hkv, D}, seed + 2);
  const float scale = 1.0f / std::sqrt(float(D));
  Tensor full = Tensor::empty({L, Hq, D}, DType::F32), lse;
  ops::AttentionShape a{scale, true, int32_t(L)};
  ops::attention_forward(full, lse, q, k, v, Tensor::from_i32({2}, {0, int32_t(L)}),
                         Tensor::from_i32({1}, {int32_t(L)}), a);

  const int64_t p0 = L - n_new;
  Tensor kc = make_cache(k, L + 5), vc = make_cache(v, L + 5);
  Tensor qn = q.narrow0(p0, n_new).clone();
  Tensor out = Tensor::empty({n_new, Hq, D}, DType::F32);
  out.fill_(std::nanf(""));
  ops::attention_decode(out, qn, kc, vc, L, p0, scale);
  EXPECT_TRUE(tensors_close(out, full.narrow0(p0, n_new).clone(), 2e-5, 1e-4));
}

}  // namespace

TEST(OpsAttentionDecode, MatchesFullCausalAttention) {
  uint64_t seed = 1000;
  for (auto [Hq, Hkv] : {std::pair<int64_t, int64_t>{4, 4}, {6, 2}, {8, 1}})
    for (int64_t L : {1, 2, 37, 300})
      for (int64_t n_new : {1, 3, 16}) {
        if (n_new > L) continue;
        check_against_full(L, n_new, Hq, Hkv, 16, seed += 10);
      }
  check_against_full(1000, 1, 4, 2, 64, 7);  // long cache, threaded path
  check_against_full(129, 5, 3, 3, 7, 8);    // odd head dim
}

// Rows at or after q_start_pos + n_new are outside every query's causal window: never read.
TEST(OpsAttentionDecode, IgnoresRowsAfterTheQueries) {
  const int64_t Hq = 4, Hkv = 2, D = 8, L = 20, n_new = 3, p0 = 10;
  Tensor q = randn({n_new, Hq, D}, 1), k = randn({L, Hkv, D}, 2), v = randn({L, Hkv, D}, 3);
  Tensor kc = k.clone(), vc = v.clone();
  Tensor out = Tensor::empty({n_new, Hq, D}, DType::F32), ref = Tensor::empty({n_new, Hq, D}, DType::F32);
  ops::attention_decode(ref, q, kc, vc, p0 + n_new, p0, 0.3f);
  for (int64_t r = p0 + n_new; r < L; ++r) {
    kc.narrow0(r, 1).fill_(std::nanf(""));
    vc.narrow0(r, 1).fill_(std::nanf(""));
  }
  ops::attention_decode(out, q, kc, vc, L, p0, 0.3f);
  EXPECT_TRUE(tensors_close(out, ref, 0.0));
}

// BF16 tensors (fp32 math): the F32 op on the same bf16-rounded inputs, to bf16 output rounding.
TEST(OpsAttentionDecode, Bf16MatchesF32) {
  const int64_t Hq = 6, Hkv = 2, D = 16, cap = 64, L = 50, n_new = 4;
  auto round = [](const Tensor& t) { return t.to(DType::BF16).to(DType::F32); };
  Tensor q = round(randn({n_new, Hq, D}, 11)), k = round(randn({cap, Hkv, D}, 12)),
         v = round(randn({cap, Hkv, D}, 13));
  Tensor ref = Tensor::empty({n_new, Hq, D}, DType::F32);
  ops::attention_decode(ref, q, k, v, L, L - n_new, 0.25f);
  Tensor out = Tensor::empty({n_new, Hq, D}, DType::BF16);
  ops::attention_decode(out, q.to(DType::BF16), k.to(DType::BF16), v.to(DType::BF16), L, L - n_new, 0.25f);
  EXPECT_TRUE(tensors_close(out.to(DType::F32), ref, 1e-6, 1.0 / 128));
}

TEST(OpsAttentionDecode, BadInputsThrow) {
  Tensor q = randn({2, 4, 8}, 1), kc = randn({10, 2, 8}, 2), vc = randn({10, 2, 8}, 3);
  Tensor out = Tensor::empty({2, 4, 8}, DType::F32);
  EXPECT_NO_THROW(ops::attention_decode(out, q, kc, vc, 10, 8, 1.0f));
  EXPECT_THROW(ops::attention_decode(out, q, kc, vc, 9, 8, 1.0f), Error);    // rows 8, 9 > cache_len
  EXPECT_THROW(ops::attention_decode(out, q, kc, vc, 11, 8, 1.0f), Error);   // beyond capacity
  EXPECT_THROW(ops::attention_decode(out, q, kc, vc, 5, -1, 1.0f), Error);   // negative start
  Tensor bad_heads = randn({10, 3, 8}, 4);
  EXPECT_THROW(ops::attention_decode(out, q, bad_heads, bad_heads, 10, 8, 1.0f), Error);
  Tensor bad_d = randn({10, 2, 4}, 5);
  EXPECT_THROW(ops::attention_decode(out, q, bad_d, bad_d, 10, 8, 1.0f), Error);
  EXPECT_THROW(ops::attention_decode(out, q, kc, randn({9, 2, 8}, 6), 9, 7, 1.0f), Error);
  Tensor bad_out = Tensor::empty({1, 4, 8}, DType::F32);
  EXPECT_THROW(ops::attention_decode(bad_out, q, kc, vc, 10, 8, 1.0f), Error);
  Tensor bf_out = Tensor::empty({2, 4, 8}, DType::BF16);
  EXPECT_THROW(ops::attention_decode(bf_out, q, kc, vc, 10, 8, 1.0f), Error);
}
