#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/attention/op.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::testkit;

namespace {

struct Case {
  std::vector<int32_t> lens;   // real tokens per sequence
  std::vector<int32_t> slots;  // rows per sequence (>= lens; == lens when packed)
  int64_t Hq = 4, Hkv = 2, D = 8;
  bool causal = false;
  int64_t rows() const {
    int64_t n = 0;
    for (int32_t s : slots) n += s;
    return n;
  }
  Tensor cu() const {
    std::vector<int32_t> c{0};
    for (int32_t s : slots) c.push_back(c.back() + s);
    return Tensor::from_i32({int64_t(c.size())}, c);
  }
  Tensor seq_lens() const { return Tensor::from_i32({int64_t(lens.size())}, lens); }
  ops::AttentionShape shape() const {
    ops::AttentionShape a;
    a.scale = 1.0f / std::sqrt(float(D));
    a.causal = causal;
    for (int32_t l : lens) a.max_seqlen = std::max(a.max_seqlen, l);
    return a;
  }
};

Case packed(bool causal) {
  Case c;
  c.lens = {5, 1, 7};
  c.slots = c.lens;
  c.causal = causal;
  return c;
}

// Per sequence and head: softmax(scale·QKᵀ (+ causal mask))·V in double; padding rows 0.
void naive_attention(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                     Tensor& lse) {
  const int64_t N = c.rows(), Hq = c.Hq, Hkv = c.Hkv, D = c.D;
  const double scale = c.shape().scale;
  out = Tensor::zeros({N, Hq, D}, DType::F32);
  lse = Tensor::zeros({N, Hq}, DType::F32);
  int64_t start = 0;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    const int64_t L = c.lens[s];
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      for (int64_t i = 0; i < L; ++i) {
        const int64_t nk = c.causal ? i + 1 : L;
        std::vector<double> sc(static_cast<size_t>(nk));
        double mx = -1e300;
        for (int64_t j = 0; j < nk; ++j) {
          double d = 0;
          for (int64_t e = 0; e < D; ++e)
            d += double(q.f32()[((start + i) * Hq + h) * D + e]) * k.f32()[((start + j) * Hkv + g) * D + e];
          sc[size_t(j)] = d * scale;
          mx = std::max(mx, sc[size_t(j)]);
        }
        double z = 0;
        for (double& x : sc) z += (x = std::exp(x - mx));
        for (int64_t e = 0; e < D; ++e) {
          double o = 0;
          for (int64_t j = 0; j < nk; ++j)
            o += sc[size_t(j)] / z * v.f32()[((start + j) * Hkv + g) * D + e];
          out.f32()[((start + i) * Hq + h) * D + e] = float(o);
        }
        lse.f32()[(start + i) * Hq + h] = float(mx + std::log(z));
      }
    }
    start += c.slots[s];
  }
}

struct Inputs {
  Tensor q, k, v;
};
Inputs make_inputs(const Case& c, uint64_t seed) {
  const int64_t N = c.rows();
  return {randn({N, c.Hq, c.D}, seed), randn({N, c.Hkv, c.D}, seed + 1),
          randn({N, c.Hkv, c.D}, seed + 2)};
}

void check_forward(const Case& c, uint64_t seed) {
  Inputs in = make_inputs(c, seed);
  const int64_t N = c.rows();
  Tensor out = Tensor::empty({N, c.Hq, c.D}, DType::F32);
  Tensor lse = Tensor::empty({N, c.Hq}, DType::F32);
  out.fill_(std::nanf(""));
  lse.fill_(std::nanf(""));
  ops::attention_forward(out, lse, in.q, in.k, in.v, c.cu(), c.seq_lens(), c.shape());
  Tensor ref_out, ref_lse;
  naive_attention(c, in.q, in.k, in.v, ref_out, ref_lse);
  EXPECT_TRUE(tensors_close(out, ref_out, 2e-5, 1e-4));
  EXPECT_TRUE(tensors_close(lse, ref_lse, 2e-5, 1e-5));
}

void check_grads(const Case& c, uint64_t seed, int64_t max_samples = 256) {
  Inputs in = make_inputs(c, seed);
  const int64_t N = c.rows();
  Tensor cu = c.cu(), lens = c.seq_lens();
  const auto a = c.shape();
  Tensor R = randn({N, c.Hq, c.D}, seed + 10);
  Tensor out = Tensor::empty({N, c.Hq, c.D}, DType::F32), lse = Tensor::empty({N, c.Hq}, DType::F32);
  auto objective = [&] {
    ops::attention_forward(out, lse, in.q, in.k, in.v, cu, lens, a);
    return dot(out, R);
  };
  objective();
  Tensor dq = Tensor::empty(in.q.shape(), DType::F32), dk = Tensor::empty(in.k.shape(), DType::F32),
         dv = Tensor::empty(in.v.shape(), DType::F32);
  dq.fill_(7.0f);  // everything, padding rows included, must be overwritten
  dk.fill_(7.0f);
  dv.fill_(7.0f);
  ops::attention_backward(dq, dk, dv, R, in.q, in.k, in.v, out, lse, cu, lens, a);
  FdOptions o;
  o.max_samples = max_samples;
  EXPECT_TRUE(fd_check("dq", objective, in.q, dq, o));
  EXPECT_TRUE(fd_check("dk", objective, in.k, dk, o));
  EXPECT_TRUE(fd_check("dv", objective, in.v, dv, o));
  // Padding rows: exactly zero gradient.
  int64_t start = 0;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    for (int64_t r = start + c.lens[s]; r < start + c.slots[s]; ++r) {
      for (int64_t e = 0; e < c.Hq * c.D; ++e) EXPECT_EQ(dq.f32()[r * c.Hq * c.D + e], 0.0f);
      for (int64_t e = 0; e < c.Hkv * c.D; ++e) {
        EXPECT_EQ(dk.f32()[r * c.Hkv * c.D + e], 0.0f);
        EXPECT_EQ(dv.f32()[r * c.Hkv * c.D + e], 0.0f);
      }
    }
    start += c.slots[s];
  }
}

}  // namespace

TEST(OpsAttention, ForwardMatchesNaivePackedBidirectional) { check_forward(packed(false), 100); }
TEST(OpsAttention, ForwardMatchesNaivePackedCausal) { check_forward(packed(true), 200); }

TEST(OpsAttention, ForwardMatchesNaiveLongSequences) {
  // Longer than one query block (128 rows), both masks, GQA 2:1 and MHA.
  for (bool causal : {false, true}) {
    Case c;
    c.lens = {300, 129, 3};
    c.slots = {300, 140, 3};
    c.Hq = 2;
    c.Hkv = 1;
    c.D = 16;
    c.causal = causal;
    check_forward(c, 300 + causal);
    c.Hkv = 2;
    check_forward(c, 310 + causal);
  }
}

TEST(OpsAttention, PaddingRowsOutputZero) {
  Case c;
  c.lens = {5, 1, 7};
  c.slots = {8, 8, 8};
  for (bool causal : {false, true}) {
    c.causal = causal;
    check_forward(c, 400);  // the naive reference has zero padding rows
  }
  // Rows past the last slot are padding too.
  Inputs in = make_inputs(c, 410);
  Tensor cu = Tensor::from_i32({4}, {0, 8, 16, 23});
  Tensor lens = c.seq_lens();
  Tensor out = Tensor::empty({24, 4, 8}, DType::F32), lse = Tensor::empty({24, 4}, DType::F32);
  out.fill_(5.0f);
  ops::attention_forward(out, lse, in.q, in.k, in.v, cu, lens, c.shape());
  for (int64_t r = 23; r < 24; ++r)
    for (int64_t e = 0; e < 32; ++e) EXPECT_EQ(out.f32()[r * 32 + e], 0.0f);
}

TEST(OpsAttention, SequencesNeverMix) {
  for (bool causal : {false, true}) {
    Case c = packed(causal);
    Inputs in = make_inputs(c, 500);
    const int64_t N = c.rows();
    Tensor out1 = Tensor::empty({N, c.Hq, c.D}, DType::F32), lse = Tensor::empty({N, c.Hq}, DType::F32);
    ops::attention_forward(out1, lse, in.q, in.k, in.v, c.cu(), c.seq_lens(), c.shape());
    // Change every token of sequence 2 (rows 6..12).
    for (int64_t r = 6; r < 13; ++r) {
      for (int64_t e = 0; e < c.Hq * c.D; ++e) in.q.f32()[r * c.Hq * c.D + e] += 1.5f;
      for (int64_t e = 0; e < c.Hkv * c.D; ++e) {
        in.k.f32()[r * c.Hkv * c.D + e] *= -2.0f;
        in.v.f32()[r * c.Hkv * c.D + e] += 3.0f;
      }
    }
    Tensor out2 = Tensor::empty({N, c.Hq, c.D}, DType::F32);
    ops::attention_forward(out2, lse, in.q, in.k, in.v, c.cu(), c.seq_lens(), c.shape());
    const int64_t row = c.Hq * c.D;
    for (int64_t i = 0; i < 6 * row; ++i) EXPECT_EQ(out1.f32()[i], out2.f32()[i]);
    bool changed = false;
    for (int64_t i = 6 * row; i < N * row; ++i) changed |= out1.f32()[i] != out2.f32()[i];
    EXPECT_TRUE(changed);
    // A one-token sequence attends only to itself: its output is its own v.
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t e = 0; e < c.D; ++e)
        EXPECT_NEAR(out2.f32()[(5 * c.Hq + h) * c.D + e], in.v.f32()[(5 * c.Hkv + h / 2) * c.D + e], 1e-6);
  }
}

TEST(OpsAttention, GradFDPackedBidirectionalGqa) { check_grads(packed(false), 600); }
TEST(OpsAttention, GradFDPackedCausalGqa) { check_grads(packed(true), 700); }

TEST(OpsAttention, GradFDPaddedBshdGqa) {
  Case c;
  c.lens = {5, 1, 7};
  c.slots = {8, 8, 8};
  for (bool causal : {false, true}) {
    c.causal = causal;
    check_grads(c, 800 + causal);
  }
}

TEST(OpsAttention, GradFDLongSequencesMultiBlock) {
  Case c;
  c.lens = {150, 9};
  c.slots = {150, 12};
  c.Hq = 2;
  c.Hkv = 1;
  c.D = 4;
  for (bool causal : {false, true}) {
    c.causal = causal;
    check_grads(c, 900 + causal, 96);
  }
}

TEST(OpsAttention, BadInputsThrow) {
  Case c = packed(false);
  Inputs in = make_inputs(c, 1000);
  const int64_t N = c.rows();
  Tensor out = Tensor::empty({N, 4, 8}, DType::F32), lse = Tensor::empty({N, 4}, DType::F32);
  Tensor cu = c.cu(), lens = c.seq_lens();
  const auto a = c.shape();
  Tensor k3 = randn({N, 3, 8}, 1);  // 4 query heads are not a multiple of 3 kv heads
  EXPECT_THROW(ops::attention_forward(out, lse, in.q, k3, k3, cu, lens, a), Error);
  Tensor kd = randn({N, 2, 4}, 2);
  EXPECT_THROW(ops::attention_forward(out, lse, in.q, kd, kd, cu, lens, a), Error);
  Tensor lse_bad = Tensor::empty({N, 2}, DType::F32);
  EXPECT_THROW(ops::attention_forward(out, lse_bad, in.q, in.k, in.v, cu, lens, a), Error);
  Tensor long_len = Tensor::from_i32({3}, {6, 1, 7});  // 6 tokens in a slot of 5
  EXPECT_THROW(ops::attention_forward(out, lse, in.q, in.k, in.v, cu, long_len, a), Error);
  Tensor cu_past = Tensor::from_i32({4}, {0, 5, 6, 14});
  EXPECT_THROW(ops::attention_forward(out, lse, in.q, in.k, in.v, cu_past, lens, a), Error);
  Tensor cu_short = Tensor::from_i32({3}, {0, 5, 6});
  EXPECT_THROW(ops::attention_forward(out, lse, in.q, in.k, in.v, cu_short, lens, a), Error);
  Tensor dq = Tensor::empty({N, 4, 8}, DType::F32), dk = Tensor::empty({N, 2, 8}, DType::F32),
         dv_bad = Tensor::empty({N, 4, 8}, DType::F32);
  EXPECT_THROW(ops::attention_backward(dq, dk, dv_bad, out, in.q, in.k, in.v, out, lse, cu, lens, a),
               Error);
}
