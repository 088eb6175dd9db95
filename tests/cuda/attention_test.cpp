// CUDA attention (cuDNN SDPA path and the plain CUDA fallback) against the CPU reference.
//
// Inputs are random (biofm rng, never zero); outputs are poisoned with NaN before each call, so
// a row the GPU forgets to write fails the comparison. BF16 runs are compared with the CPU op
// run on the same bf16-rounded inputs. Errors are measured per sequence as
//   rms(got - ref) / max(rms(ref over the sequence), 0.1 · rms(ref over the batch))
// (a length-1 sequence has dk ≈ 0, hence the floor), against 2e-2 for BF16 and 1e-4 for F32;
// lse is compared with an absolute tolerance. Rows outside every sequence must be exactly 0.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <cudnn.h>

#include "../testing.h"
#include "biofm/core/cuda_context.h"
#include "biofm/core/tensor.h"
#include "biofm/ops/attention/cudnn_sdpa.h"
#include "biofm/ops/attention/op.h"

using namespace biofm;
using namespace biofm::testkit;
namespace ad = biofm::ops::cuda::attention_detail;
using ad::AttentionPath;

namespace {

void device_sync() {
  cudaError_t e = cudaDeviceSynchronize();
  ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
}

struct Batch {
  std::vector<int32_t> lens;   // tokens per sequence
  std::vector<int32_t> slots;  // rows per sequence (>= lens; == lens when packed)
  int64_t tail = 0;            // extra rows after the last slot (padding too)
  int64_t Hq = 8, Hkv = 2, D = 64;
  bool causal = false;
  bool uniform = false;  // AttentionShape.uniform (all lens equal, packed)

  static Batch packed(std::vector<int32_t> l, int64_t Hq, int64_t Hkv, int64_t D, bool causal) {
    Batch b;
    b.lens = l;
    b.slots = l;
    b.Hq = Hq, b.Hkv = Hkv, b.D = D, b.causal = causal;
    return b;
  }
  int64_t B() const { return int64_t(lens.size()); }
  int64_t rows() const {
    int64_t n = tail;
    for (int32_t s : slots) n += s;
    return n;
  }
  std::vector<int32_t> cu_host() const {
    std::vector<int32_t> c{0};
    for (int32_t s : slots) c.push_back(c.back() + s);
    return c;
  }
  Tensor cu() const { return Tensor::from_i32({B() + 1}, cu_host()); }
  Tensor seq_lens() const { return Tensor::from_i32({B()}, lens); }
  ops::AttentionShape shape() const {
    ops::AttentionShape a;
    a.scale = 1.0f / std::sqrt(float(D));
    a.causal = causal;
    for (int32_t l : lens) a.max_seqlen = std::max(a.max_seqlen, l);
    a.uniform = uniform;
    return a;
  }
  // Which sequence row r belongs to (-1: padding).
  std::vector<int> owner() const {
    std::vector<int> o(size_t(rows()), -1);
    auto cu = cu_host();
    for (int64_t s = 0; s < B(); ++s)
      for (int64_t r = cu[size_t(s)]; r < cu[size_t(s)] + lens[size_t(s)]; ++r) o[size_t(r)] = int(s);
    return o;
  }
  std::string name() const {
    std::string n = "lens {";
    for (size_t i = 0; i < lens.size(); ++i) n += (i ? "," : "") + std::to_string(lens[i]);
    n += "} Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D) +
         (causal ? " causal" : " bidirectional");
    return n;
  }
};

struct Inputs {
  Tensor q, k, v, dout;  // CPU F32 (already bf16-rounded for BF16 runs)
};

Tensor round_bf16(const Tensor& t) { return t.to(DType::BF16).to(DType::F32); }

Inputs make_inputs(const Batch& b, uint64_t seed, bool bf16) {
  const int64_t N = b.rows();
  Inputs in;
  in.q = randn({N, b.Hq, b.D}, seed);
  in.k = randn({N, b.Hkv, b.D}, seed + 101);
  in.v = randn({N, b.Hkv, b.D}, seed + 202);
  in.dout = randn({N, b.Hq, b.D}, seed + 303);
  if (bf16) {
    in.q = round_bf16(in.q);
    in.k = round_bf16(in.k);
    in.v = round_bf16(in.v);
    in.dout = round_bf16(in.dout);
  }
  return in;
}

struct Result {
  Tensor out, lse, dq, dk, dv;  // CPU F32
};

Result run_cpu(const Batch& b, const Inputs& in) {
  Result r;
  const Tensor cu = b.cu(), lens = b.seq_lens();
  r.out = Tensor::empty(in.q.shape(), DType::F32);
  r.lse = Tensor::empty({b.rows(), b.Hq}, DType::F32);
  ops::cpu::attention_forward(r.out, r.lse, in.q, in.k, in.v, cu, lens, b.shape());
  r.dq = Tensor::empty(in.q.shape(), DType::F32);
  r.dk = Tensor::empty(in.k.shape(), DType::F32);
  r.dv = Tensor::empty(in.v.shape(), DType::F32);
  ops::cpu::attention_backward(r.dq, r.dk, r.dv, in.dout, in.q, in.k, in.v, r.out, r.lse, cu, lens,
                               b.shape());
  return r;
}

Tensor to_gpu(const Tensor& t, DType dt) { return (dt == DType::BF16 ? t.to(DType::BF16) : t).to(Device::CUDA); }

Tensor nan_gpu(const Shape& s, DType dt) {
  Tensor h = Tensor::empty(s, DType::F32);
  h.fill_(std::numeric_limits<float>::quiet_NaN());
  return to_gpu(h, dt);
}

Tensor to_cpu_f32(const Tensor& t) {
  Tensor h = t.to(Device::CPU);
  return h.dtype() == DType::F32 ? h : h.to(DType::F32);
}

// Forward then (optionally) backward on the GPU with an explicit path. The backward consumes
// the GPU forward's own out and lse, as training does.
// `between` runs after the forward, before the backward (tests switch options there).
Result run_gpu(const Batch& b, const Inputs& in, DType dt, AttentionPath path, bool backward = true,
               const ops::AttentionShape* shape_override = nullptr,
               AttentionPath backward_path = AttentionPath::Auto, const std::function<void()>& between = {}) {
  if (backward_path == AttentionPath::Auto) backward_path = path;
  const ops::AttentionShape a = shape_override ? *shape_override : b.shape();
  Tensor q = to_gpu(in.q, dt), k = to_gpu(in.k, dt), v = to_gpu(in.v, dt);
  Tensor cu = b.cu().to(Device::CUDA), lens = b.seq_lens().to(Device::CUDA);
  Tensor out = nan_gpu(in.q.shape(), dt), lse = nan_gpu({b.rows(), b.Hq}, DType::F32);
  device_sync();
  ad::attention_forward_with(path, out, lse, q, k, v, cu, lens, a);
  if (between) between();
  Result r;
  if (backward) {
    Tensor dout = to_gpu(in.dout, dt);
    Tensor dq = nan_gpu(in.q.shape(), dt), dk = nan_gpu(in.k.shape(), dt), dv = nan_gpu(in.v.shape(), dt);
    device_sync();
    ad::attention_backward_with(backward_path, dq, dk, dv, dout, q, k, v, out, lse, cu, lens, a);
    device_sync();
    r.dq = to_cpu_f32(dq);
    r.dk = to_cpu_f32(dk);
    r.dv = to_cpu_f32(dv);
  }
  device_sync();
  r.out = to_cpu_f32(out);
  r.lse = to_cpu_f32(lse);
  return r;
}

// Per-sequence relative RMS error (see the file comment) and exact zeros on padding rows.
::testing::AssertionResult matches(const char* what, const Tensor& got, const Tensor& ref,
                                   const Batch& b, double tol, bool absolute = false,
                                   double* worst_err = nullptr) {
  const int64_t N = b.rows();
  const int64_t row = got.numel() / std::max<int64_t>(N, 1);
  const auto own = b.owner();
  const float* g = got.f32();
  const float* r = ref.f32();
  double all_sq = 0;
  int64_t all_n = 0;
  for (int64_t i = 0; i < N; ++i)
    if (own[size_t(i)] >= 0)
      for (int64_t c = 0; c < row; ++c, ++all_n) all_sq += double(r[i * row + c]) * r[i * row + c];
  const double all_rms = all_n ? std::sqrt(all_sq / double(all_n)) : 0.0;
  for (int64_t s = 0; s < b.B(); ++s) {
    double err_sq = 0, ref_sq = 0, worst = 0;
    int64_t n = 0, worst_i = -1;
    for (int64_t i = 0; i < N; ++i) {
      if (own[size_t(i)] != s) continue;
      for (int64_t c = 0; c < row; ++c, ++n) {
        const double d = double(g[i * row + c]) - double(r[i * row + c]);
        err_sq += d * d;
        ref_sq += double(r[i * row + c]) * r[i * row + c];
        if (!(std::fabs(d) <= worst)) {
          worst = std::fabs(d);
          worst_i = i * row + c;
        }
      }
    }
    if (n == 0) continue;
    const double rms = std::sqrt(err_sq / double(n));
    const double denom = absolute ? 1.0 : std::max(std::sqrt(ref_sq / double(n)), 0.1 * all_rms);
    const double err = rms / std::max(denom, 1e-30);
    if (worst_err && !(err <= *worst_err)) *worst_err = err;
    if (!(err < tol))
      return ::testing::AssertionFailure()
             << what << ": sequence " << s << " (length " << b.lens[size_t(s)] << ") error " << err
             << " >= " << tol << "; worst element " << worst_i << ": " << g[worst_i] << " vs "
             << r[worst_i];
  }
  for (int64_t i = 0; i < N; ++i) {
    if (own[size_t(i)] >= 0) continue;
    for (int64_t c = 0; c < row; ++c)
      if (g[i * row + c] != 0.0f)  // NaN included
        return ::testing::AssertionFailure() << what << ": padding row " << i << " element " << c
                                               << " is " << g[i * row + c] << ", not 0";
  }
  return ::testing::AssertionSuccess();
}

void expect_matches_cpu(const Batch& b, DType dt, AttentionPath path, uint64_t seed) {
  SCOPED_TRACE(b.name() + " " + dtype_name(dt) + " path " + ops::attention_backend_name(path));
  const bool bf16 = dt == DType::BF16;
  const Inputs in = make_inputs(b, seed, bf16);
  const Result ref = run_cpu(b, in);
  const Result got = run_gpu(b, in, dt, path);
  const double tol = bf16 ? 2e-2 : 1e-4;
  const double lse_tol = bf16 ? 2e-2 : 1e-4;
  double e[5] = {0, 0, 0, 0, 0};
  EXPECT_TRUE(matches("out", got.out, ref.out, b, tol, false, &e[0]));
  EXPECT_TRUE(matches("lse", got.lse, ref.lse, b, lse_tol, /*absolute=*/true, &e[1]));
  EXPECT_TRUE(matches("dq", got.dq, ref.dq, b, tol, false, &e[2]));
  EXPECT_TRUE(matches("dk", got.dk, ref.dk, b, tol, false, &e[3]));
  EXPECT_TRUE(matches("dv", got.dv, ref.dv, b, tol, false, &e[4]));
  std::printf("  %-55s %-4s %-8s worst per-sequence error: out %.1e lse %.1e dq %.1e dk %.1e dv %.1e\n",
              b.name().c_str(), dtype_name(dt), ops::attention_backend_name(path), e[0], e[1], e[2], e[3], e[4]);
}

bool cudnn_available(DType dt, int64_t D, int64_t Hq, int64_t Hkv, std::string* why) {
  return ad::cudnn_sdpa_supported(dt, D, Hq, Hkv, why);
}

const std::vector<int32_t> kOddLens = {1, 17, 130, 513};

// rms(a - b) / rms(b) over the rows of sequence `seq`.
double rel_diff_rows(const Tensor& a, const Tensor& b, const Batch& batch, int seq) {
  const int64_t N = batch.rows(), row = a.numel() / N;
  const auto own = batch.owner();
  double d2 = 0, r2 = 0;
  for (int64_t i = 0; i < N; ++i)
    if (own[size_t(i)] == seq)
      for (int64_t c = 0; c < row; ++c) {
        const double d = double(a.f32()[i * row + c]) - b.f32()[i * row + c];
        d2 += d * d;
        r2 += double(b.f32()[i * row + c]) * b.f32()[i * row + c];
      }
  return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

bool bits_equal_rows(const Tensor& a, const Tensor& b, const Batch& batch, int seq) {
  const int64_t N = batch.rows(), row = a.numel() / N;
  const auto own = batch.owner();
  for (int64_t i = 0; i < N; ++i)
    if (own[size_t(i)] == seq &&
        std::memcmp(a.f32() + i * row, b.f32() + i * row, size_t(row) * sizeof(float)) != 0)
      return false;
  return true;
}

// Changing sequence 1's tokens leaves every other sequence's outputs and gradients unchanged,
// bit for bit; the fallback is also deterministic (same inputs → same bits). cuDNN's backward
// accumulates dQ with atomics (run-to-run bit differences), so its dq is compared with a tight
// tolerance instead.
void expect_isolated(const Batch& b, DType dt, AttentionPath path) {
  SCOPED_TRACE(b.name() + " " + dtype_name(dt) + " path " + ops::attention_backend_name(path));
  const Inputs in = make_inputs(b, 7, dt == DType::BF16);
  const Result r1 = run_gpu(b, in, dt, path);
  const Result r1b = run_gpu(b, in, dt, path);
  Inputs in2;
  in2.q = in.q.clone();
  in2.k = in.k.clone();
  in2.v = in.v.clone();
  in2.dout = in.dout.clone();
  const auto own = b.owner();
  for (int64_t i = 0; i < b.rows(); ++i) {
    if (own[size_t(i)] != 1) continue;
    for (Tensor* t : {&in2.q, &in2.k, &in2.v, &in2.dout}) {
      const int64_t row = t->numel() / b.rows();
      for (int64_t c = 0; c < row; ++c) t->f32()[i * row + c] = -2.0f * t->f32()[i * row + c] + 0.5f;
    }
  }
  const Result r2 = run_gpu(b, in2, dt, path);
  for (int s = 0; s < int(b.B()); ++s) {
    for (auto [name, x, y, z] : {std::tuple{"out", &r1.out, &r2.out, &r1b.out},
                                 std::tuple{"lse", &r1.lse, &r2.lse, &r1b.lse},
                                 std::tuple{"dq", &r1.dq, &r2.dq, &r1b.dq},
                                 std::tuple{"dk", &r1.dk, &r2.dk, &r1b.dk},
                                 std::tuple{"dv", &r1.dv, &r2.dv, &r1b.dv}}) {
      const bool atomics = path != AttentionPath::Fallback && std::string(name) == "dq";
      if (s != 1 && !atomics) {
        EXPECT_TRUE(bits_equal_rows(*x, *y, b, s)) << name << " of sequence " << s << " changed";
      }
      if (s != 1 && atomics) {
        EXPECT_LT(rel_diff_rows(*y, *x, b, s), 1e-2) << name << " of sequence " << s << " changed";
      }
      if (path == AttentionPath::Fallback) {
        EXPECT_TRUE(bits_equal_rows(*x, *z, b, s)) << name << " of sequence " << s << " not deterministic";
      }
    }
  }
  // Sequence 1 itself must have changed (the test would be vacuous otherwise).
  EXPECT_FALSE(bits_equal_rows(r1.out, r2.out, b, 1));
}

Batch bshd_batch(int64_t Hq, int64_t Hkv, int64_t D, bool causal) {
  Batch b;
  b.lens = {5, 64, 1, 100, 0};
  b.slots = {128, 128, 128, 128, 16};
  b.tail = 7;
  b.Hq = Hq, b.Hkv = Hkv, b.D = D, b.causal = causal;
  return b;
}

}  // namespace

TEST(CudaAttention, PathSelection) {
  EXPECT_EQ(ad::attention_path_for(AttentionPath::Auto, DType::F32, 64, 8, 2), AttentionPath::Fallback);
  EXPECT_EQ(ad::attention_path_for(AttentionPath::Auto, DType::BF16, 20, 20, 20), AttentionPath::Fallback);
  EXPECT_EQ(ad::attention_path_for(AttentionPath::Auto, DType::BF16, 136, 8, 8), AttentionPath::Fallback);
  EXPECT_EQ(ad::attention_path_for(AttentionPath::Fallback, DType::BF16, 64, 8, 2), AttentionPath::Fallback);
  std::string why;
  const bool ok = cudnn_available(DType::BF16, 64, 8, 2, &why);
  EXPECT_EQ(ad::attention_path_for(AttentionPath::Auto, DType::BF16, 64, 8, 2),
            ok ? AttentionPath::Cudnn : AttentionPath::Fallback);
  std::printf("cuDNN %zu (headers %d); SDPA path for BF16 D=64: %s%s\n", cudnnGetVersion(), CUDNN_VERSION,
              ok ? "available" : "unavailable: ", why.c_str());
  // Buckets: powers of two for B and S, quarter steps for the token count.
  EXPECT_EQ(ad::bucket_batch(1), 1);
  EXPECT_EQ(ad::bucket_batch(3), 4);
  EXPECT_EQ(ad::bucket_batch(33), 64);
  EXPECT_EQ(ad::bucket_seqlen(1), 64);
  EXPECT_EQ(ad::bucket_seqlen(100), 128);
  EXPECT_EQ(ad::bucket_seqlen(513), 1024);
  EXPECT_EQ(ad::bucket_seqlen(1024), 1024);
  EXPECT_EQ(ad::bucket_seqlen(1100), 2048);
  EXPECT_EQ(ad::bucket_tokens(5000), 5120);
  EXPECT_EQ(ad::bucket_tokens(8192), 8192);
  EXPECT_EQ(ad::bucket_tokens(10), 1024);
}

TEST(CudaAttention, FallbackF32MatchesCpu) {
  for (int64_t D : {16, 24, 64, 128})
    for (bool causal : {false, true})
      expect_matches_cpu(Batch::packed(kOddLens, 8, 2, D, causal), DType::F32, AttentionPath::Fallback,
                         100 + uint64_t(D) + causal);
  // Plain multi-head, an odd head dim.
  expect_matches_cpu(Batch::packed({3, 70, 33}, 4, 4, 40, true), DType::F32, AttentionPath::Fallback, 5);
}

TEST(CudaAttention, FallbackBf16MatchesCpu) {
  for (int64_t D : {16, 24, 64, 128})
    for (bool causal : {false, true})
      expect_matches_cpu(Batch::packed(kOddLens, 8, 2, D, causal), DType::BF16, AttentionPath::Fallback,
                         200 + uint64_t(D) + causal);
}

TEST(CudaAttention, CudnnBf16MatchesCpu) {
  std::string why;
  if (!cudnn_available(DType::BF16, 64, 8, 2, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  // ESM-2 head dims: 8M 16, 35M 24, 150M 32, 650M 64, 3B/15B 128 (Llama: 64, 128).
  for (int64_t D : {16, 24, 32, 64, 128})
    for (bool causal : {false, true}) {
      expect_matches_cpu(Batch::packed(kOddLens, 8, 2, D, causal), DType::BF16, AttentionPath::Cudnn,
                         300 + uint64_t(D) + causal);
      expect_matches_cpu(Batch::packed({33, 1, 200}, 4, 4, D, causal), DType::BF16, AttentionPath::Cudnn,
                         400 + uint64_t(D) + causal);
    }
  expect_matches_cpu(Batch::packed({77, 300}, 20, 20, 80, false), DType::BF16, AttentionPath::Cudnn, 450);
  // A sequence longer than 1024 (S bucket 2048).
  expect_matches_cpu(Batch::packed({1100, 5}, 8, 2, 128, true), DType::BF16, AttentionPath::Cudnn, 500);
}

TEST(CudaAttention, AutoPathMatchesCpu) {
  // What the training path does: BF16 with ESM-2 / Llama head dims, whichever path Auto picks.
  expect_matches_cpu(Batch::packed({200, 31, 1}, 20, 20, 64, false), DType::BF16, AttentionPath::Auto, 600);
  expect_matches_cpu(Batch::packed({200, 31, 1}, 20, 20, 32, false), DType::BF16, AttentionPath::Auto, 601);
  expect_matches_cpu(Batch::packed({200, 31, 1}, 20, 20, 20, false), DType::BF16, AttentionPath::Auto, 603);
  expect_matches_cpu(Batch::packed({300, 64}, 8, 2, 128, true), DType::BF16, AttentionPath::Auto, 602);
}

TEST(CudaAttention, BshdPaddingRowsFallback) {
  // Padding rows inside slots, an empty sequence, and rows after the last slot: all exactly 0.
  expect_matches_cpu(bshd_batch(8, 2, 24, false), DType::F32, AttentionPath::Fallback, 700);
  expect_matches_cpu(bshd_batch(8, 2, 24, true), DType::F32, AttentionPath::Fallback, 701);
  expect_matches_cpu(bshd_batch(4, 4, 64, false), DType::BF16, AttentionPath::Fallback, 702);
}

TEST(CudaAttention, BshdPaddingRowsCudnn) {
  std::string why;
  if (!cudnn_available(DType::BF16, 64, 8, 2, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  expect_matches_cpu(bshd_batch(8, 2, 64, false), DType::BF16, AttentionPath::Cudnn, 710);
  expect_matches_cpu(bshd_batch(8, 2, 128, true), DType::BF16, AttentionPath::Cudnn, 711);
}

TEST(CudaAttention, SequencesAreIsolatedFallback) {
  expect_isolated(Batch::packed({40, 90, 17}, 8, 2, 24, false), DType::F32, AttentionPath::Fallback);
  expect_isolated(bshd_batch(8, 2, 64, true), DType::BF16, AttentionPath::Fallback);
}

TEST(CudaAttention, SequencesAreIsolatedCudnn) {
  std::string why;
  if (!cudnn_available(DType::BF16, 64, 8, 2, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  expect_isolated(Batch::packed({40, 90, 17}, 8, 2, 64, false), DType::BF16, AttentionPath::Cudnn);
  expect_isolated(bshd_batch(8, 2, 128, true), DType::BF16, AttentionPath::Cudnn);
}

TEST(CudaAttention, PathsShareTheLseConvention) {
  // Both paths write and read lse[N, Hq] = natural-log logsumexp, so a forward on one path and
  // the backward on the other agree with the CPU op.
  std::string why;
  if (!cudnn_available(DType::BF16, 64, 8, 2, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  const Batch b = bshd_batch(8, 2, 64, true);
  const Inputs in = make_inputs(b, 850, true);
  const Result ref = run_cpu(b, in);
  for (auto [fp, bp] : {std::pair{AttentionPath::Cudnn, AttentionPath::Fallback},
                        std::pair{AttentionPath::Fallback, AttentionPath::Cudnn}}) {
    SCOPED_TRACE(std::string("forward ") + ops::attention_backend_name(fp) + ", backward " + ops::attention_backend_name(bp));
    const Result got = run_gpu(b, in, DType::BF16, fp, true, nullptr, bp);
    EXPECT_TRUE(matches("lse", got.lse, ref.lse, b, 2e-2, true));
    EXPECT_TRUE(matches("dq", got.dq, ref.dq, b, 2e-2));
    EXPECT_TRUE(matches("dk", got.dk, ref.dk, b, 2e-2));
    EXPECT_TRUE(matches("dv", got.dv, ref.dv, b, 2e-2));
  }
}

TEST(CudaAttention, CudnnGraphsAreBucketed) {
  std::string why;
  if (!cudnn_available(DType::BF16, 64, 8, 2, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  // Same buckets (B → 4, S → 128, tokens → 1024): the second batch builds no new graph.
  const Batch b1 = Batch::packed({100, 7, 50}, 8, 2, 64, true);
  const Batch b2 = Batch::packed({120, 3, 9, 64}, 8, 2, 64, true);
  expect_matches_cpu(b1, DType::BF16, AttentionPath::Cudnn, 800);
  const size_t built = ad::cudnn_sdpa_graph_count();
  expect_matches_cpu(b2, DType::BF16, AttentionPath::Cudnn, 801);
  EXPECT_EQ(ad::cudnn_sdpa_graph_count(), built);
}

TEST(CudaAttention, GraphsBuiltAheadServeTheForwardPasses) {
  // attention_prepare_forward (embed, score and eval announce their batches): each graph is built
  // on a thread and cuDNN handle of its own; the forward passes then take it (waiting for it if
  // still building) instead of building it, it executes with the handle that built it, and the
  // results match the CPU. Announcing the same batches again builds nothing.
  std::string why;
  if (!cudnn_available(DType::BF16, 40, 6, 3, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  Batch ragged = Batch::packed({300, 20, 700}, 6, 3, 40, false);  // heads no other test uses
  Batch dense = Batch::packed({256, 256}, 6, 3, 40, false);
  dense.uniform = true;
  std::vector<ops::AttentionBatch> shapes;
  for (const Batch* b : {&ragged, &dense})
    shapes.push_back({b->B(), b->rows(), b->shape().max_seqlen, b->uniform, /*packed_qkv=*/false});
  const ops::QkvHeads heads{6, 3, 40};
  const size_t built0 = ad::cudnn_sdpa_graph_count(), ahead0 = ad::cudnn_sdpa_graphs_built_ahead();
  ops::attention_prepare_forward(Device::CUDA, DType::BF16, shapes, heads, /*causal=*/false);
  uint64_t seed = 3000;
  for (const Batch* b : {&ragged, &dense}) {
    SCOPED_TRACE(b->name());
    const Inputs in = make_inputs(*b, seed++, true);
    const Result ref = run_cpu(*b, in);
    const Result got = run_gpu(*b, in, DType::BF16, AttentionPath::Cudnn, /*backward=*/false);
    EXPECT_TRUE(matches("out", got.out, ref.out, *b, 2e-2));
    EXPECT_TRUE(matches("lse", got.lse, ref.lse, *b, 2e-2, /*absolute=*/true));
  }
  EXPECT_EQ(ad::cudnn_sdpa_graphs_built_ahead(), ahead0 + 2);
  EXPECT_EQ(ad::cudnn_sdpa_graph_count(), built0 + 2) << "the forward passes built no graph of their own";
  ops::attention_prepare_forward(Device::CUDA, DType::BF16, shapes, heads, /*causal=*/false);
  EXPECT_EQ(ad::cudnn_sdpa_graphs_built_ahead(), ahead0 + 2);
}

TEST(CudaAttention, MaxSeqlenUnsetIsDerived) {
  // AttentionShape.max_seqlen = 0: the op reads seq_lens back (a sync) and still gets it right.
  const Batch b = Batch::packed({3, 150, 20}, 4, 2, 32, false);
  const Inputs in = make_inputs(b, 900, false);
  const Result ref = run_cpu(b, in);
  ops::AttentionShape a = b.shape();
  a.max_seqlen = 0;
  const Result got = run_gpu(b, in, DType::F32, AttentionPath::Fallback, true, &a);
  EXPECT_TRUE(matches("out", got.out, ref.out, b, 1e-4));
  EXPECT_TRUE(matches("dq", got.dq, ref.dq, b, 1e-4));
}

TEST(CudaAttention, PublicOpDispatchesToCuda) {
  // ops::attention_forward/backward on GPU tensors go through cuda:: (path from ops.attention, OpOptions::attention).
  const Batch b = Batch::packed({9, 65}, 4, 2, 16, true);
  const Inputs in = make_inputs(b, 950, false);
  const Result ref = run_cpu(b, in);
  Tensor q = in.q.to(Device::CUDA), k = in.k.to(Device::CUDA), v = in.v.to(Device::CUDA);
  Tensor dout = in.dout.to(Device::CUDA);
  Tensor cu = b.cu().to(Device::CUDA), lens = b.seq_lens().to(Device::CUDA);
  Tensor out = nan_gpu(q.shape(), DType::F32), lse = nan_gpu({b.rows(), b.Hq}, DType::F32);
  Tensor dq = nan_gpu(q.shape(), DType::F32), dk = nan_gpu(k.shape(), DType::F32),
         dv = nan_gpu(v.shape(), DType::F32);
  device_sync();
  ops::attention_forward(out, lse, q, k, v, cu, lens, b.shape());
  ops::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu, lens, b.shape());
  device_sync();
  EXPECT_TRUE(matches("out", to_cpu_f32(out), ref.out, b, 1e-4));
  EXPECT_TRUE(matches("lse", to_cpu_f32(lse), ref.lse, b, 1e-4, true));
  EXPECT_TRUE(matches("dk", to_cpu_f32(dk), ref.dk, b, 1e-4));
}

TEST(CudaAttention, RejectsBadArguments) {
  const Batch b = Batch::packed({4}, 4, 2, 16, false);
  Tensor q = Tensor::zeros({4, 4, 16}, DType::F32).to(Device::CUDA);
  Tensor k = Tensor::zeros({4, 2, 16}, DType::F32).to(Device::CUDA);
  Tensor k3 = Tensor::zeros({4, 3, 16}, DType::F32).to(Device::CUDA);
  Tensor out = Tensor::zeros({4, 4, 16}, DType::F32).to(Device::CUDA);
  Tensor lse = Tensor::zeros({4, 4}, DType::F32).to(Device::CUDA);
  Tensor cu = b.cu().to(Device::CUDA), lens = b.seq_lens().to(Device::CUDA);
  EXPECT_THROW(ad::attention_forward_with(AttentionPath::Auto, out, lse, q, k3, k3, cu, lens, b.shape()),
               Error);  // 4 heads over 3 kv heads
  EXPECT_THROW(ad::attention_forward_with(AttentionPath::Auto, out, lse, q, k, k, b.cu(), lens, b.shape()),
               Error);  // cu_seqlens on the CPU
  EXPECT_THROW(ad::attention_forward_with(AttentionPath::Cudnn, out, lse, q, k, k, cu, lens, b.shape()),
               Error);  // F32 cannot take the cuDNN path
}

TEST(CudaAttention, UniformBatchesRunDenseCudnnGraphs) {
  // Full windows (every sequence max_seqlen long, back to back) take cuDNN's dense graph of
  // their exact shape (ops.sdpa_dense, on by default) and still match the CPU op.
  std::string why;
  if (!cudnn_available(DType::BF16, 64, 8, 2, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  ASSERT_TRUE(ops::op_options().sdpa_dense);
  uint64_t seed = 1000;
  for (auto [lens, Hq, Hkv, D] : {std::tuple{std::vector<int32_t>{256, 256, 256}, 8, 2, 64},
                                  std::tuple{std::vector<int32_t>{512, 512}, 8, 8, 128},
                                  std::tuple{std::vector<int32_t>{1024}, 4, 1, 64}})
    for (bool causal : {false, true}) {
      Batch b = Batch::packed(lens, Hq, Hkv, D, causal);
      b.uniform = true;
      const size_t before = ad::cudnn_sdpa_dense_runs();
      expect_matches_cpu(b, DType::BF16, AttentionPath::Cudnn, seed++);
      EXPECT_EQ(ad::cudnn_sdpa_dense_runs(), before + 2) << b.name() << ": forward and backward not dense";
    }
  // Other lengths keep the ragged graphs (one graph per length would be too many).
  {
    Batch b = Batch::packed({300, 300}, 8, 2, 64, true);
    b.uniform = true;
    const size_t before = ad::cudnn_sdpa_dense_runs();
    expect_matches_cpu(b, DType::BF16, AttentionPath::Cudnn, seed++);
    EXPECT_EQ(ad::cudnn_sdpa_dense_runs(), before);
  }
  // Switched off, the same batch runs the ragged graph and matches as well.
  Batch b = Batch::packed({256, 256}, 8, 2, 64, true);
  b.uniform = true;
  {
    ScopedOpOptions off([](ops::OpOptions& o) { o.sdpa_dense = false; });
    const size_t before = ad::cudnn_sdpa_dense_runs();
    expect_matches_cpu(b, DType::BF16, AttentionPath::Cudnn, seed++);
    EXPECT_EQ(ad::cudnn_sdpa_dense_runs(), before);
  }
  // Dense forward with ragged backward and the reverse (what runs when only one of the two dense
  // graphs builds): both read the statistics the other wrote.
  const Inputs in = make_inputs(b, seed++, true);
  const Result ref = run_cpu(b, in);
  for (bool forward_dense : {true, false}) {
    SCOPED_TRACE(forward_dense ? "dense forward, ragged backward" : "ragged forward, dense backward");
    ScopedOpOptions first([&](ops::OpOptions& o) { o.sdpa_dense = forward_dense; });
    const size_t before = ad::cudnn_sdpa_dense_runs();
    const Result got = run_gpu(b, in, DType::BF16, AttentionPath::Cudnn, true, nullptr, AttentionPath::Auto, [&] {
      ops::OpOptions o = ops::op_options();
      o.sdpa_dense = !forward_dense;
      ops::set_op_options(o);
    });
    EXPECT_EQ(ad::cudnn_sdpa_dense_runs(), before + 1);
    EXPECT_TRUE(matches("out", got.out, ref.out, b, 2e-2));
    EXPECT_TRUE(matches("lse", got.lse, ref.lse, b, 2e-2, true));
    EXPECT_TRUE(matches("dq", got.dq, ref.dq, b, 2e-2));
    EXPECT_TRUE(matches("dk", got.dk, ref.dk, b, 2e-2));
    EXPECT_TRUE(matches("dv", got.dv, ref.dv, b, 2e-2));
  }
}

TEST(CudaAttention, PackedQkvIsReadInPlaceAndMatchesCpu) {
  // attention_*_packed: q, k, v as the parts of one projection output [N, (Hq + 2·Hkv)·D];
  // cuDNN reads them (and writes dq | dk | dv) through strides, ragged and dense graphs alike,
  // and padding rows of dqkv come out zero. Every path matches the CPU op on the same q, k, v.
  std::string why;
  if (!cudnn_available(DType::BF16, 64, 8, 2, &why)) GTEST_SKIP() << "cuDNN path unavailable: " << why;
  uint64_t seed = 2000;
  std::vector<Batch> batches = {Batch::packed({37, 128, 5, 300}, 8, 2, 64, false),
                                Batch::packed({256, 256}, 4, 4, 64, true)};
  batches[1].uniform = true;
  Batch padded = Batch::packed({9, 40, 3}, 4, 2, 32, false);
  padded.slots = {16, 48, 8};
  padded.tail = 5;
  batches.push_back(padded);
  for (const Batch& b : batches) {
    for (AttentionPath path : {AttentionPath::Cudnn, AttentionPath::Fallback}) {
      SCOPED_TRACE(b.name() + " path " + ops::attention_backend_name(path));
      const Inputs in = make_inputs(b, seed++, true);
      const Result ref = run_cpu(b, in);
      const int64_t N = b.rows(), wq = b.Hq * b.D, wkv = b.Hkv * b.D, row = wq + 2 * wkv;
      Tensor qkv_h = Tensor::empty({N, row}, DType::F32);
      for (int64_t n = 0; n < N; ++n) {
        std::copy(in.q.f32() + n * wq, in.q.f32() + (n + 1) * wq, qkv_h.f32() + n * row);
        std::copy(in.k.f32() + n * wkv, in.k.f32() + (n + 1) * wkv, qkv_h.f32() + n * row + wq);
        std::copy(in.v.f32() + n * wkv, in.v.f32() + (n + 1) * wkv, qkv_h.f32() + n * row + wq + wkv);
      }
      const Tensor qkv = to_gpu(qkv_h, DType::BF16), dout = to_gpu(in.dout, DType::BF16);
      const Tensor cu = b.cu().to(Device::CUDA), lens = b.seq_lens().to(Device::CUDA);
      Tensor out = nan_gpu(in.q.shape(), DType::BF16), lse = nan_gpu({N, b.Hq}, DType::F32);
      Tensor dqkv = nan_gpu({N, row}, DType::BF16);
      const ops::QkvHeads h{b.Hq, b.Hkv, b.D};
      const size_t packed0 = ad::cudnn_sdpa_packed_runs();
      ad::attention_forward_packed_with(path, out, lse, qkv, h, cu, lens, b.shape());
      ad::attention_backward_packed_with(path, dqkv, dout, qkv, h, out, lse, cu, lens, b.shape());
      device_sync();
      EXPECT_EQ(ad::cudnn_sdpa_packed_runs(), packed0 + (path == AttentionPath::Cudnn ? 2 : 0));
      EXPECT_TRUE(matches("out", to_cpu_f32(out), ref.out, b, 2e-2));
      EXPECT_TRUE(matches("lse", to_cpu_f32(lse), ref.lse, b, 2e-2, /*absolute=*/true));
      const Tensor d = to_cpu_f32(dqkv);
      Tensor dq = Tensor::empty(in.q.shape(), DType::F32), dk = Tensor::empty(in.k.shape(), DType::F32),
             dv = Tensor::empty(in.v.shape(), DType::F32);
      for (int64_t n = 0; n < N; ++n) {
        std::copy(d.f32() + n * row, d.f32() + n * row + wq, dq.f32() + n * wq);
        std::copy(d.f32() + n * row + wq, d.f32() + n * row + wq + wkv, dk.f32() + n * wkv);
        std::copy(d.f32() + n * row + wq + wkv, d.f32() + (n + 1) * row, dv.f32() + n * wkv);
      }
      EXPECT_TRUE(matches("dq (packed)", dq, ref.dq, b, 2e-2));
      EXPECT_TRUE(matches("dk (packed)", dk, ref.dk, b, 2e-2));
      EXPECT_TRUE(matches("dv (packed)", dv, ref.dv, b, 2e-2));
    }
  }
}

TEST(CudaAttention, BrokenUniformPromiseIsAnError) {
  // N != B·max_seqlen is caught without a sync; unequal lengths in equal slots are caught by
  // ops.attention_check (which reads the layout back).
  Batch b = Batch::packed({8, 6}, 4, 2, 16, false);
  b.uniform = true;
  const Inputs in = make_inputs(b, 1100, false);
  EXPECT_THROW(run_gpu(b, in, DType::F32, AttentionPath::Fallback), Error);
  Batch padded = Batch::packed({8, 6}, 4, 2, 16, false);
  padded.slots = {8, 8};  // N = 16 = B·max_seqlen, but the second sequence is short
  padded.uniform = true;
  ScopedOpOptions check([](ops::OpOptions& o) { o.attention_check = true; });
  EXPECT_THROW(run_gpu(padded, make_inputs(padded, 1101, false), DType::F32, AttentionPath::Fallback), Error);
}
