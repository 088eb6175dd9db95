// CUDA attention_decode against the CPU op (F32 and BF16, GQA, short and long caches, one and
// several new rows). BF16 runs are compared with the CPU op on the same bf16-rounded inputs.
// Cache rows at or after cache_len hold NaN on the GPU, and out is poisoned with NaN first, so
// a kernel that reads past the causal window or forgets a row fails the comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "biofm/ops/attention/op.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

struct DecodeCase {
  int64_t cache_len, n_new, Hq, Hkv, D;
};

std::string name(const DecodeCase& c, DType t) {
  return std::string(dtname(t)) + " cache_len " + std::to_string(c.cache_len) + " n_new " +
         std::to_string(c.n_new) + " Hq " + std::to_string(c.Hq) + " Hkv " + std::to_string(c.Hkv) +
         " D " + std::to_string(c.D);
}

void check_case(const DecodeCase& c, DType t, uint64_t seed) {
  const std::string what = name(c, t);
  SCOPED_TRACE(what);
  const int64_t cap = c.cache_len + 3, p0 = c.cache_len - c.n_new;
  const float scale = 1.0f / std::sqrt(float(c.D));
  Tensor q = round_to(randn({c.n_new, c.Hq, c.D}, seed), t);
  Tensor k = round_to(randn({cap, c.Hkv, c.D}, seed + 1), t);
  Tensor v = round_to(randn({cap, c.Hkv, c.D}, seed + 2), t);
  for (int64_t r = c.cache_len; r < cap; ++r) {  // unfilled cache rows
    k.narrow0(r, 1).fill_(NAN);
    v.narrow0(r, 1).fill_(NAN);
  }
  Tensor ref = Tensor::empty({c.n_new, c.Hq, c.D}, DType::F32);
  ops::attention_decode(ref, q, k, v, c.cache_len, p0, scale);

  Tensor dq = to_device(q, t), dk = to_device(k, t), dv = to_device(v, t);
  Tensor out = Tensor::empty({c.n_new, c.Hq, c.D}, t, Device::CUDA);
  poison(out);
  ops::attention_decode(out, dq, dk, dv, c.cache_len, p0, scale);
  EXPECT_TRUE(close(what, to_host_f32(out), ref, t == DType::F32 ? 1e-5 : 1e-2));
}

}  // namespace

TEST(CudaAttentionDecode, MatchesCpu) {
  BIOFM_REQUIRE_GPU();
  const DecodeCase cases[] = {
      {1, 1, 8, 2, 64},     {37, 1, 8, 2, 64},   {1000, 1, 8, 2, 64},  {37, 5, 8, 2, 64},
      {1000, 7, 32, 8, 64}, {1000, 1, 4, 4, 128}, {37, 37, 6, 2, 40},  {1000, 3, 6, 3, 16},
      {9000, 1, 8, 2, 128}, {257, 1, 2, 1, 8}};
  uint64_t seed = 500;
  for (DType t : {DType::F32, DType::BF16})
    for (const DecodeCase& c : cases) check_case(c, t, seed += 10);
}

// Decode steps are asynchronous: many launches back to back, one sync at the end.
TEST(CudaAttentionDecode, RepeatedStepsWithoutSync) {
  BIOFM_REQUIRE_GPU();
  const int64_t Hq = 8, Hkv = 2, D = 64, cap = 64;
  Tensor k = randn({cap, Hkv, D}, 1), v = randn({cap, Hkv, D}, 2), q = randn({cap, Hq, D}, 3);
  Tensor dk = to_device(k, DType::F32), dv = to_device(v, DType::F32), dq = to_device(q, DType::F32);
  Tensor out = Tensor::empty({cap, Hq, D}, DType::F32, Device::CUDA);
  poison(out);
  for (int64_t p = 0; p < cap; ++p) {
    Tensor o = out.narrow0(p, 1);
    ops::attention_decode(o, dq.narrow0(p, 1), dk, dv, p + 1, p, 0.125f);
  }
  Tensor ref = Tensor::empty({cap, Hq, D}, DType::F32);
  ops::attention_decode(ref, q, k, v, cap, 0, 0.125f);  // all rows at once on the CPU
  EXPECT_TRUE(close("stepwise", to_host_f32(out), ref, 1e-5));
}

TEST(CudaAttentionDecode, RejectsBadArguments) {
  BIOFM_REQUIRE_GPU();
  Tensor q = Tensor::zeros({2, 4, 8}, DType::F32, Device::CUDA);
  Tensor kc = Tensor::zeros({10, 2, 8}, DType::F32, Device::CUDA);
  Tensor out = Tensor::empty({2, 4, 8}, DType::F32, Device::CUDA);
  EXPECT_THROW(ops::attention_decode(out, q, kc, kc, 9, 8, 1.0f), Error);
  EXPECT_THROW(ops::attention_decode(out, q, kc, kc, 11, 8, 1.0f), Error);
  Tensor host_k = Tensor::zeros({10, 2, 8}, DType::F32);
  EXPECT_THROW(ops::attention_decode(out, q, host_k, host_k, 10, 8, 1.0f), Error);
  Tensor bf_k = Tensor::zeros({10, 2, 8}, DType::BF16, Device::CUDA);
  EXPECT_THROW(ops::attention_decode(out, q, bf_k, bf_k, 10, 8, 1.0f), Error);
}
