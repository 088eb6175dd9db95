// CUDA elementwise helpers (add_inplace, cast, sum_accumulate) against the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "../testing.h"
#include "biofm/core/device_memory.h"
#include "biofm/ops/elementwise/op.h"

namespace biofm {
namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no GPU visible"

Tensor host_f32(const Tensor& t) { return t.to(Device::CPU).to(DType::F32); }

Tensor nan_host(const Shape& s, DType dt) {
  Tensor h = Tensor::empty(s, DType::F32);
  h.fill_(std::numeric_limits<float>::quiet_NaN());
  return h.to(dt);
}

// Same bytes (host copies).
bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::CPU), hb = b.to(Device::CPU);
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) == 0;
}

// A device copy of host tensor t placed at element offset `off` of a larger buffer
// (off = 1 defeats 16-byte vector access).
Tensor upload_at(const Tensor& t, int64_t off) {
  Tensor buf = Tensor::zeros({t.numel() + off}, t.dtype(), Device::CUDA);
  Tensor v = buf.flat_slice(off, t.shape());
  v.copy_from(t);
  return v;
}

const int64_t kSizes[] = {1, 7, 1003, (1 << 20) + 5};

TEST(CudaElementwise, AddInplace) {
  REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t n : kSizes)
      for (int64_t off : {0, 1}) {
        const Tensor y = testkit::randn({n}, 10 + n).to(dt), x = testkit::randn({n}, 20 + n).to(dt);
        Tensor yc = y.clone();
        ops::cpu::add_inplace(yc, x);
        Tensor yg = upload_at(y, off);
        ops::cuda::add_inplace(yg, upload_at(x, off));
        // Both round the fp32 sum to nearest even: identical bits.
        EXPECT_TRUE(same_bytes(yg, yc)) << dtype_name(dt) << " n=" << n << " offset " << off;
      }
}

TEST(CudaElementwise, AddInplaceShapeMismatchThrows) {
  REQUIRE_GPU();
  Tensor y = Tensor::zeros({4}, DType::F32, Device::CUDA);
  EXPECT_THROW(ops::cuda::add_inplace(y, Tensor::zeros({5}, DType::F32, Device::CUDA)), Error);
  EXPECT_THROW(ops::cuda::add_inplace(y, Tensor::zeros({4}, DType::BF16, Device::CUDA)), Error);
}

TEST(CudaElementwise, Cast) {
  REQUIRE_GPU();
  for (int64_t n : kSizes)
    for (int64_t off : {0, 1}) {
      // Values spanning many binades, so rounding ties and carries are exercised.
      Tensor f = testkit::randn({n}, 30 + n, 3.0f);
      for (int64_t i = 0; i < n; i += 17) f.f32()[i] *= 1e-30f;
      // F32 -> BF16.
      Tensor bc = Tensor::empty({n}, DType::BF16);
      ops::cpu::cast(bc, f);
      Tensor bg = upload_at(nan_host({n}, DType::BF16), off);  // poisoned: catches unwritten elements
      ops::cuda::cast(bg, upload_at(f, off));
      EXPECT_TRUE(same_bytes(bg, bc)) << "F32->BF16 n=" << n << " offset " << off;
      // BF16 -> F32.
      Tensor fc = Tensor::empty({n}, DType::F32);
      ops::cpu::cast(fc, bc);
      Tensor fg = upload_at(nan_host({n}, DType::F32), off);
      ops::cuda::cast(fg, upload_at(bc, off));
      EXPECT_TRUE(same_bytes(fg, fc)) << "BF16->F32 n=" << n << " offset " << off;
      // Same dtype: a copy (also into a differently shaped tensor of the same numel).
      Tensor cg = nan_host({1, n}, DType::F32).to(Device::CUDA);
      ops::cuda::cast(cg, upload_at(f, off));
      EXPECT_TRUE(same_bytes(cg, f)) << "F32 copy n=" << n;
    }
  Tensor i = Tensor::from_i32({3}, {1, -2, 3}).to(Device::CUDA);
  Tensor j = Tensor::zeros({3}, DType::I32, Device::CUDA);
  ops::cuda::cast(j, i);
  EXPECT_TRUE(same_bytes(i, j));
  Tensor bad = Tensor::zeros({3}, DType::F32, Device::CUDA);
  EXPECT_THROW(ops::cuda::cast(bad, i), Error);
}

TEST(CudaElementwise, SumAccumulate) {
  REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t n : {int64_t(1), int64_t(1003), int64_t(1 << 20) + 5, int64_t(1 << 24) + 3})
      for (int64_t off : {0, 1}) {
        const Tensor x = testkit::randn({n}, 40 + n).to(dt);
        Tensor acc_c = Tensor::from_f32({1}, {1.25f});
        ops::cpu::sum_accumulate(acc_c, x);
        Tensor acc_g = Tensor::from_f32({1}, {1.25f}).to(Device::CUDA);
        const Tensor xg = upload_at(x, off);
        ops::cuda::sum_accumulate(acc_g, xg);
        const float got = host_f32(acc_g).f32()[0], want = acc_c.f32()[0];
        // Both sum in double; only the order differs.
        EXPECT_NEAR(got, want, 1e-6 * (std::fabs(want) + std::sqrt(double(n))))
            << dtype_name(dt) << " n=" << n << " offset " << off;
        // Deterministic: a second run adds exactly the same amount.
        Tensor acc2 = Tensor::from_f32({1}, {1.25f}).to(Device::CUDA);
        ops::cuda::sum_accumulate(acc2, xg);
        EXPECT_EQ(host_f32(acc2).f32()[0], got);
      }
  // Accumulates: twice adds twice.
  const Tensor x = testkit::randn({5000}, 50).to(Device::CUDA);
  Tensor acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
  ops::cuda::sum_accumulate(acc, x);
  const float once = host_f32(acc).f32()[0];
  ops::cuda::sum_accumulate(acc, x);
  EXPECT_NEAR(host_f32(acc).f32()[0], 2.0f * once, 1e-5 * std::fabs(once) + 1e-6);
}

}  // namespace
}  // namespace biofm
