// CUDA optimizer ops (AdamW per tensor and over flat buffers, gradient norm and clipping,
// sum of squares, scaling) against the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../testing.h"
#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/ops/optim/op.h"

namespace biofm {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no GPU visible"

Tensor host(const Tensor& t) { return t.to(Device::CPU); }
Tensor host_f32(const Tensor& t) { return t.to(Device::CPU).to(DType::F32); }

double rel_err(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = double(a.f32()[i]) - double(b.f32()[i]);
    num += d * d;
    den += double(b.f32()[i]) * double(b.f32()[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

// Elements whose bits differ (host tensors of the same dtype).
int64_t bit_mismatches(const Tensor& a, const Tensor& b) {
  const size_t es = dtype_size(a.dtype());
  int64_t bad = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    bad += std::memcmp(static_cast<const char*>(a.raw()) + i * es, static_cast<const char*>(b.raw()) + i * es, es) != 0;
  return bad;
}

Tensor abs_of(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = std::fabs(t.f32()[i]);
  return t;
}

// A device copy of host tensor t at element offset `off` of a larger buffer.
Tensor upload_at(const Tensor& t, int64_t off) {
  Tensor buf = Tensor::zeros({t.numel() + off}, t.dtype(), Device::CUDA);
  Tensor v = buf.flat_slice(off, t.shape());
  v.copy_from(t);
  return v;
}

TEST(CudaOptim, AdamWStepMatchesCpu) {
  REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(1003), int64_t(1 << 20) + 3})
    for (int64_t off : {0, 1}) {
      Tensor p = testkit::randn({n}, 1 + n), m = testkit::randn({n}, 2 + n, 0.1f),
             v = abs_of(testkit::randn({n}, 3 + n, 0.01f));
      Tensor pg = upload_at(p, off), mg = upload_at(m, off), vg = upload_at(v, off);
      for (int64_t step = 1; step <= 3; ++step) {
        const Tensor g = testkit::randn({n}, 100 * step + n);
        ops::AdamWHyper h{1e-3f, 0.9f, 0.98f, 1e-8f, 0.01f, step};
        ops::cpu::adamw_step(p, g, m, v, h);
        ops::cuda::adamw_step(pg, upload_at(g, off), mg, vg, h);
      }
      const std::string what = "n=" + std::to_string(n) + " offset " + std::to_string(off);
      EXPECT_LT(rel_err(host(pg), p), 1e-6) << what;
      EXPECT_LT(rel_err(host(mg), m), 1e-6) << what;
      EXPECT_LT(rel_err(host(vg), v), 1e-6) << what;
      // Same fp32 operation sequence as the CPU: expect (nearly) every element bit-identical.
      EXPECT_LE(bit_mismatches(host(pg), p), n / 1000) << what;
    }
}

// beta1 >= 0.5 and < 0.5 take the two forms of torch's lerp.
TEST(CudaOptim, AdamWStepSmallBeta1) {
  REQUIRE_GPU();
  const int64_t n = 4099;
  Tensor p = testkit::randn({n}, 5), m = testkit::randn({n}, 6, 0.1f), v = abs_of(testkit::randn({n}, 7, 0.01f));
  Tensor pg = p.to(Device::CUDA), mg = m.to(Device::CUDA), vg = v.to(Device::CUDA);
  const Tensor g = testkit::randn({n}, 8);
  ops::AdamWHyper h{3e-3f, 0.3f, 0.95f, 1e-5f, 0.1f, 7};
  ops::cpu::adamw_step(p, g, m, v, h);
  ops::cuda::adamw_step(pg, g.to(Device::CUDA), mg, vg, h);
  EXPECT_LT(rel_err(host(pg), p), 1e-6);
  EXPECT_LT(rel_err(host(mg), m), 1e-6);
}

TEST(CudaOptim, SumSquaresAndScale) {
  REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(1003), int64_t(1 << 22) + 1})
    for (int64_t off : {0, 1}) {
      const Tensor g = testkit::randn({n}, 20 + n);
      Tensor acc_c = Tensor::from_f32({1}, {0.75f});
      ops::cpu::sum_squares_accumulate(acc_c, g);
      Tensor acc_g = Tensor::from_f32({1}, {0.75f}).to(Device::CUDA);
      Tensor gg = upload_at(g, off);
      ops::cuda::sum_squares_accumulate(acc_g, gg);
      EXPECT_NEAR(host(acc_g).f32()[0], acc_c.f32()[0], 1e-6 * acc_c.f32()[0]) << "n=" << n;

      Tensor sc = g.clone();
      ops::cpu::scale_inplace(sc, 0.37f);
      ops::cuda::scale_inplace(gg, 0.37f);
      EXPECT_EQ(bit_mismatches(host(gg), sc), 0) << "n=" << n << " offset " << off;
    }
}

TEST(CudaOptim, GradNormClipCoef) {
  REQUIRE_GPU();
  const int64_t n = (1 << 20) + 7;
  const Tensor g = testkit::randn({n}, 30);  // norm ~ 1024
  for (float max_norm : {1.0f, 0.0f, -1.0f, 1e6f}) {
    Tensor norm_c = Tensor::empty({1}, DType::F32), clip_c = Tensor::empty({1}, DType::F32);
    ops::cpu::grad_norm_clip_coef(norm_c, clip_c, g, max_norm);
    Tensor norm_g = Tensor::from_f32({1}, {NAN}).to(Device::CUDA);
    Tensor clip_g = Tensor::from_f32({1}, {NAN}).to(Device::CUDA);
    ops::cuda::grad_norm_clip_coef(norm_g, clip_g, g.to(Device::CUDA), max_norm);
    const float nrm = host(norm_g).f32()[0], clip = host(clip_g).f32()[0];
    EXPECT_NEAR(nrm, norm_c.f32()[0], 1e-6 * norm_c.f32()[0]) << "max_norm " << max_norm;
    EXPECT_NEAR(clip, clip_c.f32()[0], 1e-6 * clip_c.f32()[0]) << "max_norm " << max_norm;
    if (max_norm == 1.0f) {
      EXPECT_LT(clip, 1.0f);
    }
    if (max_norm <= 0.0f || max_norm == 1e6f) {
      EXPECT_EQ(clip, 1.0f);
    }
  }
}

// Several steps of the whole-buffer AdamW with clipping (clip_coef < 1), two decay ranges,
// with and without the bf16 compute copy, against the CPU.
void flat_case(int64_t n, const std::vector<int64_t>& ranges, bool with_copy, bool ranges_defined,
               int64_t off) {
  Tensor p = testkit::randn({n}, 40), m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  Tensor pg = upload_at(p, off), mg = upload_at(m, off), vg = upload_at(v, off);
  Tensor copy_c = with_copy ? Tensor::zeros({n}, DType::BF16) : Tensor();
  Tensor copy_g;
  if (with_copy) {
    Tensor poison = Tensor::empty({n}, DType::F32);
    poison.fill_(std::numeric_limits<float>::quiet_NaN());
    copy_g = upload_at(poison.to(DType::BF16), off);
  }
  Tensor dr;
  if (ranges_defined) {
    dr = Tensor::empty({int64_t(ranges.size() / 2), 2}, DType::I64);
    for (size_t i = 0; i < ranges.size(); ++i) dr.i64()[i] = ranges[i];
  }
  const Tensor dr_g = ranges_defined ? dr.to(Device::CUDA) : Tensor();
  Tensor norm_c = Tensor::empty({1}, DType::F32), clip_c = Tensor::empty({1}, DType::F32);
  Tensor norm_g = Tensor::empty({1}, DType::F32, Device::CUDA), clip_g = Tensor::empty({1}, DType::F32, Device::CUDA);
  for (int64_t step = 1; step <= 4; ++step) {
    // norm ~ 3: clipped to max_norm 1 (clip_coef ~ 1/3).
    const Tensor g = testkit::randn({n}, 1000 + step, 3.0f / std::sqrt(float(n)));
    const Tensor gg = upload_at(g, off);
    ops::AdamWHyper h{4e-4f, 0.9f, 0.98f, 1e-8f, 0.1f, step};
    ops::cpu::grad_norm_clip_coef(norm_c, clip_c, g, 1.0f);
    ops::cpu::adamw_flat(p, copy_c, g, m, v, dr, clip_c, h);
    ops::cuda::grad_norm_clip_coef(norm_g, clip_g, gg, 1.0f);
    ops::cuda::adamw_flat(pg, copy_g, gg, mg, vg, dr_g, clip_g, h);
    EXPECT_LT(host(clip_g).f32()[0], 1.0f);
    EXPECT_NEAR(host(clip_g).f32()[0], clip_c.f32()[0], 1e-6);
  }
  const std::string what = "n=" + std::to_string(n) + (with_copy ? " copy" : "") +
                           (ranges_defined ? "" : " no ranges") + " offset " + std::to_string(off);
  EXPECT_LT(rel_err(host(pg), p), 1e-6) << what;
  EXPECT_LT(rel_err(host(mg), m), 1e-6) << what;
  EXPECT_LT(rel_err(host(vg), v), 1e-6) << what;
  EXPECT_LE(bit_mismatches(host(pg), p), n / 1000 + 1) << what;
  if (with_copy) {
    EXPECT_LT(rel_err(host_f32(copy_g), copy_c.to(DType::F32)), 1e-2) << what;
    EXPECT_LE(bit_mismatches(host(copy_g), copy_c), n / 1000 + 1) << what;
  }
  // Weight decay applied only inside the ranges: a zero-gradient step moves only decayed
  // elements (m = v = 0 there after resetting).
  if (ranges_defined) {
    Tensor p0 = host(pg);
    Tensor zero = Tensor::zeros({n}, DType::F32, Device::CUDA);
    Tensor mz = Tensor::zeros({n}, DType::F32, Device::CUDA), vz = Tensor::zeros({n}, DType::F32, Device::CUDA);
    Tensor one = Tensor::from_f32({1}, {1.0f}).to(Device::CUDA);
    Tensor nocopy;
    ops::AdamWHyper h{1e-2f, 0.9f, 0.98f, 1e-8f, 0.5f, 1};
    ops::cuda::adamw_flat(pg, nocopy, zero, mz, vz, dr_g, one, h);
    const Tensor p1 = host(pg);
    auto inside = [&](int64_t i) {
      for (size_t k = 0; k + 1 < ranges.size(); k += 2)
        if (i >= ranges[k] && i < ranges[k + 1]) return true;
      return false;
    };
    for (int64_t i = 0; i < n; ++i) {
      const bool in = inside(i);
      const float want = in ? p0.f32()[i] * float(1.0 - 1e-2 * 0.5) : p0.f32()[i];
      ASSERT_EQ(p1.f32()[i], want) << what << ": element " << i << (in ? " (decayed)" : " (not decayed)");
    }
  }
}

TEST(CudaOptim, AdamWFlatMatchesCpu) {
  REQUIRE_GPU();
  const int64_t n = 100003;
  const std::vector<int64_t> ranges = {10, 5001, 7003, 100000};
  for (bool copy : {true, false}) {
    flat_case(n, ranges, copy, true, 0);
    flat_case(n, ranges, copy, true, 1);
  }
  flat_case(n, {}, true, true, 0);      // R = 0: no decay
  flat_case(n, {}, false, false, 0);    // undefined: no decay
  flat_case(n, {0, n}, true, true, 0);  // everything decays
  flat_case(5, {1, 2, 3, 4}, true, true, 0);
}

// A non-finite gradient norm gives clip_coef NaN, and adamw_flat then changes nothing.
TEST(CudaOptim, NonFiniteGradientsSkipTheStep) {
  REQUIRE_GPU();
  const int64_t n = 10007;
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Tensor g = testkit::randn({n}, 60);
    g.f32()[1234] = bad;
    Tensor norm_c = Tensor::empty({1}, DType::F32), clip_c = Tensor::empty({1}, DType::F32);
    ops::cpu::grad_norm_clip_coef(norm_c, clip_c, g, 1.0f);
    const Tensor gg = g.to(Device::CUDA);
    Tensor norm_g = Tensor::zeros({1}, DType::F32, Device::CUDA), clip_g = Tensor::zeros({1}, DType::F32, Device::CUDA);
    ops::cuda::grad_norm_clip_coef(norm_g, clip_g, gg, 1.0f);
    EXPECT_FALSE(std::isfinite(host(norm_g).f32()[0]));
    EXPECT_TRUE(std::isnan(host(clip_g).f32()[0]));
    EXPECT_EQ(std::isnan(clip_c.f32()[0]), std::isnan(host(clip_g).f32()[0]));
    // Without clipping too: the step must still be skipped.
    ops::cuda::grad_norm_clip_coef(norm_g, clip_g, gg, 0.0f);
    EXPECT_TRUE(std::isnan(host(clip_g).f32()[0]));

    const Tensor p = testkit::randn({n}, 61), m = testkit::randn({n}, 62), v = abs_of(testkit::randn({n}, 63));
    Tensor pg = p.to(Device::CUDA), mg = m.to(Device::CUDA), vg = v.to(Device::CUDA);
    const Tensor copy0 = testkit::randn({n}, 64).to(DType::BF16);
    Tensor copy_g = copy0.to(Device::CUDA);
    Tensor dr = Tensor::empty({1, 2}, DType::I64);
    dr.i64()[0] = 0;
    dr.i64()[1] = n;
    ops::AdamWHyper h{1e-3f, 0.9f, 0.98f, 1e-8f, 0.1f, 3};
    ops::cuda::adamw_flat(pg, copy_g, gg, mg, vg, dr.to(Device::CUDA), clip_g, h);
    EXPECT_EQ(bit_mismatches(host(pg), p), 0);
    EXPECT_EQ(bit_mismatches(host(mg), m), 0);
    EXPECT_EQ(bit_mismatches(host(vg), v), 0);
    EXPECT_EQ(bit_mismatches(host(copy_g), copy0), 0);
  }
}

TEST(CudaOptim, AdamWFlatLarge) {
  REQUIRE_GPU();
  const int64_t n = (int64_t(1) << 24) + 11;
  flat_case(n, {0, 4096, 4096 + 17, 1 << 23, (1 << 23) + 1024, n - 5}, true, true, 0);
}

TEST(CudaOptim, BadArgumentsThrow) {
  REQUIRE_GPU();
  Tensor p = Tensor::zeros({8}, DType::F32, Device::CUDA), g = Tensor::zeros({8}, DType::F32, Device::CUDA);
  Tensor m = Tensor::zeros({8}, DType::F32, Device::CUDA), v = Tensor::zeros({7}, DType::F32, Device::CUDA);
  ops::AdamWHyper h;
  EXPECT_THROW(ops::cuda::adamw_step(p, g, m, v, h), Error);
  h.step = 0;
  Tensor v8 = Tensor::zeros({8}, DType::F32, Device::CUDA);
  EXPECT_THROW(ops::cuda::adamw_step(p, g, m, v8, h), Error);
  Tensor bad_ranges = Tensor::zeros({3}, DType::I64, Device::CUDA);
  Tensor clip = Tensor::zeros({1}, DType::F32, Device::CUDA), copy;
  ops::AdamWHyper ok;
  EXPECT_THROW(ops::cuda::adamw_flat(p, copy, g, m, v8, bad_ranges, clip, ok), Error);
  Tensor copy_f32 = Tensor::zeros({8}, DType::F32, Device::CUDA);
  Tensor ranges = Tensor::zeros({0, 2}, DType::I64, Device::CUDA);
  EXPECT_THROW(ops::cuda::adamw_flat(p, copy_f32, g, m, v8, ranges, clip, ok), Error);
}

// Not a check: prints the memory bandwidth of the whole-buffer optimizer ops on 2^28 params.
TEST(CudaOptim, ThroughputReport) {
  REQUIRE_GPU();
  const int64_t n = int64_t(1) << 28;
  Tensor p = Tensor::zeros({n}, DType::F32, Device::CUDA), g = Tensor::zeros({n}, DType::F32, Device::CUDA);
  Tensor m = Tensor::zeros({n}, DType::F32, Device::CUDA), v = Tensor::zeros({n}, DType::F32, Device::CUDA);
  Tensor copy = Tensor::zeros({n}, DType::BF16, Device::CUDA);
  Tensor dr = Tensor::empty({2, 2}, DType::I64);
  const int64_t r[4] = {0, n / 3, n / 2, n - 100};
  std::memcpy(dr.raw(), r, sizeof(r));
  Tensor dr_g = dr.to(Device::CUDA);
  Tensor norm = Tensor::zeros({1}, DType::F32, Device::CUDA), clip = Tensor::zeros({1}, DType::F32, Device::CUDA);
  cudaEvent_t e0, e1;
  BIOFM_CUDA_CHECK(cudaEventCreate(&e0));
  BIOFM_CUDA_CHECK(cudaEventCreate(&e1));
  auto time_it = [&](const char* name, double bytes_per_elem, auto&& fn) {
    fn();
    BIOFM_CUDA_CHECK(cudaEventRecord(e0, cuda_ctx::stream()));
    const int iters = 10;
    for (int i = 0; i < iters; ++i) fn();
    BIOFM_CUDA_CHECK(cudaEventRecord(e1, cuda_ctx::stream()));
    BIOFM_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    BIOFM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("[optim 2^28 params] %-28s %7.3f ms  %6.0f GB/s\n", name, ms / iters,
                bytes_per_elem * double(n) * iters / (ms * 1e-3) / 1e9);
  };
  ops::AdamWHyper h;
  Tensor none;
  time_it("grad_norm_clip_coef", 4, [&] { ops::cuda::grad_norm_clip_coef(norm, clip, g, 1.0f); });
  time_it("adamw_flat", 28, [&] { ops::cuda::adamw_flat(p, none, g, m, v, dr_g, clip, h); });
  time_it("adamw_flat + bf16 copy", 30, [&] { ops::cuda::adamw_flat(p, copy, g, m, v, dr_g, clip, h); });
  time_it("adamw_step", 28, [&] { ops::cuda::adamw_step(p, g, m, v, h); });
  time_it("scale_inplace", 8, [&] { ops::cuda::scale_inplace(g, 1.0f); });
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace
}  // namespace biofm
