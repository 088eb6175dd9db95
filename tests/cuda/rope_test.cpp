// CUDA rotary embedding against the CPU reference (label "cuda": GPU machine only).
#include <gtest/gtest.h>

#include <cmath>

#include "biofm/ops/rope/op.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

Tensor inv_freq_for(int64_t D, double theta) {
  Tensor f = Tensor::empty({D / 2}, DType::F32);
  for (int64_t i = 0; i < D / 2; ++i)
    f.f32()[i] = float(std::pow(theta, -2.0 * double(i) / double(D)));
  return f;
}

// Positions of a packed batch: sequences of the given lengths, each counting from 0.
std::vector<int32_t> packed_positions(int64_t N, int32_t seq_len) {
  std::vector<int32_t> p(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) p[size_t(i)] = int32_t(i % seq_len);
  return p;
}

}  // namespace

TEST(CudaRope, MatchesCpu) {
  BIOFM_REQUIRE_GPU();
  struct Case {
    int64_t N, H, D;
    int32_t seq_len;
    double theta;
  };
  // D = 16 (ESM-2 8M), 64, 128; D = 6 and 10 (odd halves: scalar path); long positions (8192,
  // theta 5e5 as OpenGenome2); packed sequences restarting at odd lengths.
  const std::vector<Case> cases = {
      {1, 1, 64, 1, 1e4}, {37, 3, 16, 11, 1e4}, {4096, 20, 64, 1023, 1e4}, {257, 8, 128, 8192, 5e5},
      {37, 5, 6, 7, 1e4}, {37, 2, 10, 37, 1e4}, {8192, 4, 128, 8192, 5e5}};
  uint64_t seed = 1;
  for (const auto& c : cases) {
    for (DType dt : {DType::F32, DType::BF16}) {
      for (bool inverse : {false, true}) {
        seed += 5;
        Tensor x0 = round_to(randn({c.N, c.H, c.D}, seed), dt);
        Tensor pos_h = Tensor::from_i32({c.N}, packed_positions(c.N, c.seq_len));
        Tensor f = inv_freq_for(c.D, c.theta);
        Tensor ref = x0.clone();
        ops::cpu::rope_apply(ref, pos_h, f, inverse);
        Tensor x = to_device(x0, dt);
        ops::cuda::rope_apply(x, pos_h.to(Device::CUDA), f.to(Device::CUDA), inverse);
        const std::string L = std::string("rope ") + dtname(dt) + (inverse ? " inverse" : "") +
                              " [" + std::to_string(c.N) + ", " + std::to_string(c.H) + ", " +
                              std::to_string(c.D) + "]";
        EXPECT_TRUE(close(L, to_host_f32(x), ref, tol(dt)));
      }
    }
  }
}

TEST(CudaRope, InverseUndoesForward) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 300, H = 4, D = 64;
  Tensor x0 = randn({N, H, D}, 77);
  Tensor pos = to_device_i32({N}, packed_positions(N, 100));
  Tensor f = inv_freq_for(D, 1e4).to(Device::CUDA);
  Tensor x = to_device(x0, DType::F32);
  ops::cuda::rope_apply(x, pos, f, false);
  ops::cuda::rope_apply(x, pos, f, true);
  EXPECT_TRUE(close("rope round trip", to_host_f32(x), x0, 1e-6));
}

TEST(CudaRope, MisalignedViewUsesScalarPath) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 37, H = 3, D = 64;
  Tensor flat = randn({N * H * D + 1}, 78);
  Tensor x0 = flat.flat_slice(1, {N, H, D}).clone();
  Tensor pos_h = Tensor::from_i32({N}, packed_positions(N, 20));
  Tensor f = inv_freq_for(D, 1e4);
  Tensor ref = x0.clone();
  ops::cpu::rope_apply(ref, pos_h, f, false);
  Tensor xd = to_device(flat, DType::F32);
  Tensor x = xd.flat_slice(1, {N, H, D});
  ops::cuda::rope_apply(x, pos_h.to(Device::CUDA), f.to(Device::CUDA), false);
  EXPECT_TRUE(close("rope misaligned", to_host_f32(x), ref, 1e-5));
}

// The fused-QKV split and its gradient pack, against the CPU reference: ESM-2 (no GQA), the
// Llama 1B/7B GQA shapes, and odd head dims (scalar path).
TEST(CudaRope, QkvUnpackAndPackMatchCpu) {
  BIOFM_REQUIRE_GPU();
  struct Case {
    int64_t N, Hq, Hkv, D;
  };
  const std::vector<Case> cases = {{37, 20, 20, 64}, {1000, 32, 8, 64}, {257, 32, 8, 128}, {19, 4, 2, 6}};
  uint64_t seed = 500;
  for (const auto& c : cases) {
    for (DType dt : {DType::F32, DType::BF16}) {
      seed += 7;
      const int64_t R = (c.Hq + 2 * c.Hkv) * c.D;
      Tensor packed0 = round_to(randn({c.N, R}, seed), dt);
      Tensor dq0 = round_to(randn({c.N, c.Hq, c.D}, seed + 1), dt);
      Tensor dk0 = round_to(randn({c.N, c.Hkv, c.D}, seed + 2), dt);
      Tensor dv0 = round_to(randn({c.N, c.Hkv, c.D}, seed + 3), dt);
      Tensor pos_h = Tensor::from_i32({c.N}, packed_positions(c.N, 301));
      Tensor f = inv_freq_for(c.D, 1e4);
      Tensor q_ref = Tensor::empty({c.N, c.Hq, c.D}, DType::F32), k_ref = Tensor::empty({c.N, c.Hkv, c.D}, DType::F32),
             v_ref = Tensor::empty({c.N, c.Hkv, c.D}, DType::F32), dp_ref = Tensor::empty({c.N, R}, DType::F32);
      ops::cpu::rope_unpack_qkv(q_ref, k_ref, v_ref, packed0, pos_h, f);
      ops::cpu::rope_pack_qkv_grad(dp_ref, dq0, dk0, dv0, pos_h, f);

      Tensor pos = pos_h.to(Device::CUDA), fd = f.to(Device::CUDA);
      Tensor q = Tensor::empty({c.N, c.Hq, c.D}, dt, Device::CUDA), k = Tensor::empty({c.N, c.Hkv, c.D}, dt, Device::CUDA),
             v = Tensor::empty({c.N, c.Hkv, c.D}, dt, Device::CUDA), dp = Tensor::empty({c.N, R}, dt, Device::CUDA);
      poison(dp);
      ops::cuda::rope_unpack_qkv(q, k, v, to_device(packed0, dt), pos, fd);
      ops::cuda::rope_pack_qkv_grad(dp, to_device(dq0, dt), to_device(dk0, dt), to_device(dv0, dt), pos, fd);
      const std::string L = std::string("rope qkv ") + dtname(dt) + " Hq " + std::to_string(c.Hq) + " Hkv " +
                            std::to_string(c.Hkv) + " D " + std::to_string(c.D);
      EXPECT_TRUE(close(L + " q", to_host_f32(q), q_ref, tol(dt)));
      EXPECT_TRUE(close(L + " k", to_host_f32(k), k_ref, tol(dt)));
      EXPECT_TRUE(close(L + " v", to_host_f32(v), v_ref, tol(dt)));
      EXPECT_TRUE(close(L + " dpacked", to_host_f32(dp), dp_ref, tol(dt)));
    }
  }
}
