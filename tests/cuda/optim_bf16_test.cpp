// CUDA adamw_flat on pure bf16 parameters (precision "bf16") against the CPU reference: same
// fp32 update, written back rounded to nearest even.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
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

Tensor abs_of(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = std::fabs(t.f32()[i]);
  return t;
}

// A device copy of host tensor t at element offset `off` of a larger buffer (misaligns the
// vector loads for off % 4 != 0).
Tensor upload_at(const Tensor& t, int64_t off) {
  Tensor buf = Tensor::zeros({t.numel() + off}, t.dtype(), Device::CUDA);
  Tensor v = buf.flat_slice(off, t.shape());
  v.copy_from(t);
  return v;
}

double rel_err(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = double(a.f32()[i]) - double(b.f32()[i]);
    num += d * d;
    den += double(b.f32()[i]) * double(b.f32()[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

// bf16 values as ordered integers (adjacent representable values differ by 1).
int32_t bf16_order(bf16 h) {
  const int32_t mag = int32_t(h & 0x7fff);
  return (h & 0x8000) ? -mag : mag;
}

Tensor ranges_tensor(const std::vector<int64_t>& r) {
  Tensor t = Tensor::empty({int64_t(r.size() / 2), 2}, DType::I64);
  for (size_t i = 0; i < r.size(); ++i) t.i64()[i] = r[i];
  return t;
}

// Several clipped steps of the whole-buffer AdamW over BF16 params on both backends.
void bf16_case(int64_t n, const std::vector<int64_t>& ranges, bool ranges_defined, int64_t off) {
  Tensor p = testkit::randn({n}, 40, 0.05f).to(DType::BF16), m = Tensor::zeros({n}, DType::F32),
         v = Tensor::zeros({n}, DType::F32);
  Tensor pg = upload_at(p, off), mg = upload_at(m, off), vg = upload_at(v, off);
  const Tensor dr = ranges_defined ? ranges_tensor(ranges) : Tensor();
  const Tensor dr_g = ranges_defined ? dr.to(Device::CUDA) : Tensor();
  Tensor none_c, none_g;
  Tensor norm_c = Tensor::empty({1}, DType::F32), clip_c = Tensor::empty({1}, DType::F32);
  Tensor norm_g = Tensor::empty({1}, DType::F32, Device::CUDA), clip_g = Tensor::empty({1}, DType::F32, Device::CUDA);
  for (int64_t step = 1; step <= 4; ++step) {
    const Tensor g = testkit::randn({n}, 1000 + step, 3.0f / std::sqrt(float(n)));  // clipped to norm 1
    const Tensor gg = upload_at(g, off);
    ops::AdamWHyper h{1e-3f, 0.9f, 0.98f, 1e-8f, 0.1f, step};
    ops::cpu::grad_norm_clip_coef(norm_c, clip_c, g, 1.0f);
    ops::cpu::adamw_flat(p, none_c, g, m, v, dr, clip_c, h);
    ops::cuda::grad_norm_clip_coef(norm_g, clip_g, gg, 1.0f);
    ops::cuda::adamw_flat(pg, none_g, gg, mg, vg, dr_g, clip_g, h);
  }
  const std::string what = "n=" + std::to_string(n) + (ranges_defined ? "" : " no ranges") + " offset " +
                           std::to_string(off);
  const Tensor ph = host(pg);
  ASSERT_EQ(ph.dtype(), DType::BF16) << what;
  int64_t mismatches = 0, worst_ulps = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = std::abs(int64_t(bf16_order(ph.bf()[i])) - bf16_order(p.bf()[i]));
    mismatches += d != 0;
    worst_ulps = std::max(worst_ulps, d);
  }
  // Same fp32 sequence as the CPU, then the same rounding: bit-identical but for the rare
  // element where an fp32 difference (see CudaOptim.AdamWFlatMatchesCpu) crosses a bf16
  // rounding boundary and then propagates — at most one bf16 ulp.
  EXPECT_LE(worst_ulps, 1) << what;
  EXPECT_LE(mismatches, n / 1000 + 1) << what;
  EXPECT_LT(rel_err(host(mg), m), 1e-6) << what;
  EXPECT_LT(rel_err(host(vg), v), 1e-6) << what;
}

TEST(CudaOptimBf16, AdamWFlatMatchesCpu) {
  REQUIRE_GPU();
  const int64_t n = 100003;
  const std::vector<int64_t> ranges = {10, 5001, 7003, 100000};
  for (int64_t off : {0, 1, 4}) bf16_case(n, ranges, true, off);  // 4: aligned (8 B) again
  bf16_case(n, {}, false, 0);
  bf16_case(n, {0, n}, true, 0);
  bf16_case(5, {1, 2, 3, 4}, true, 0);
  bf16_case((int64_t(1) << 22) + 11, {0, 4096, 4096 + 17, 1 << 21, (1 << 21) + 1024, (1 << 22) - 5}, true, 0);
}

// Zero gradients and moments: exactly bf16(p · (1 - lr·wd)) inside the ranges, unchanged outside.
TEST(CudaOptimBf16, DecayRangesRespected) {
  REQUIRE_GPU();
  const int64_t n = 9001;
  const std::vector<int64_t> r = {0, 3, 100, 4200, 8999, 9001};
  const Tensor p0 = testkit::randn({n}, 11).to(DType::BF16);
  Tensor pg = p0.to(Device::CUDA), none;
  Tensor g = Tensor::zeros({n}, DType::F32, Device::CUDA), m = Tensor::zeros({n}, DType::F32, Device::CUDA),
         v = Tensor::zeros({n}, DType::F32, Device::CUDA);
  const Tensor one = Tensor::from_f32({1}, {1.0f}).to(Device::CUDA);
  ops::AdamWHyper h{1e-2f, 0.9f, 0.98f, 1e-8f, 0.5f, 1};
  ops::cuda::adamw_flat(pg, none, g, m, v, ranges_tensor(r).to(Device::CUDA), one, h);
  const Tensor p1 = host(pg);
  const float decay = float(1.0 - 1e-2 * 0.5);
  for (int64_t i = 0; i < n; ++i) {
    bool in = false;
    for (size_t k = 0; k + 1 < r.size(); k += 2) in |= i >= r[k] && i < r[k + 1];
    const bf16 want = in ? f32_to_bf16(bf16_to_f32(p0.bf()[i]) * decay) : p0.bf()[i];
    ASSERT_EQ(p1.bf()[i], want) << "element " << i << (in ? " (decayed)" : " (not decayed)");
  }
}

TEST(CudaOptimBf16, NonFiniteGradientsSkipTheStep) {
  REQUIRE_GPU();
  const int64_t n = 10007;
  Tensor g = testkit::randn({n}, 60);
  g.f32()[1234] = std::numeric_limits<float>::infinity();
  const Tensor gg = g.to(Device::CUDA);
  Tensor norm_g = Tensor::zeros({1}, DType::F32, Device::CUDA), clip_g = Tensor::zeros({1}, DType::F32, Device::CUDA);
  ops::cuda::grad_norm_clip_coef(norm_g, clip_g, gg, 1.0f);
  const Tensor p = testkit::randn({n}, 61).to(DType::BF16), m = testkit::randn({n}, 62), v = abs_of(testkit::randn({n}, 63));
  Tensor pg = p.to(Device::CUDA), mg = m.to(Device::CUDA), vg = v.to(Device::CUDA), none;
  ops::AdamWHyper h{1e-3f, 0.9f, 0.98f, 1e-8f, 0.1f, 3};
  ops::cuda::adamw_flat(pg, none, gg, mg, vg, ranges_tensor({0, n}).to(Device::CUDA), clip_g, h);
  EXPECT_EQ(std::memcmp(host(pg).raw(), p.raw(), size_t(n) * 2), 0);
  EXPECT_EQ(std::memcmp(host(mg).raw(), m.raw(), size_t(n) * 4), 0);
  EXPECT_EQ(std::memcmp(host(vg).raw(), v.raw(), size_t(n) * 4), 0);
}

TEST(CudaOptimBf16, BadArgumentsThrow) {
  REQUIRE_GPU();
  Tensor pb = Tensor::zeros({8}, DType::BF16, Device::CUDA), g = Tensor::zeros({8}, DType::F32, Device::CUDA);
  Tensor m = Tensor::zeros({8}, DType::F32, Device::CUDA), v = Tensor::zeros({8}, DType::F32, Device::CUDA);
  Tensor clip = Tensor::zeros({1}, DType::F32, Device::CUDA), ranges = Tensor::zeros({0, 2}, DType::I64, Device::CUDA);
  Tensor copy = Tensor::zeros({8}, DType::BF16, Device::CUDA);
  ops::AdamWHyper h;
  EXPECT_THROW(ops::cuda::adamw_flat(pb, copy, g, m, v, ranges, clip, h), Error);  // no copy with bf16 params
  Tensor mb = Tensor::zeros({8}, DType::BF16, Device::CUDA), none;
  EXPECT_THROW(ops::cuda::adamw_flat(pb, none, g, mb, v, ranges, clip, h), Error);  // moments stay F32
}

}  // namespace
}  // namespace biofm
