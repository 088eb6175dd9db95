// CUDA foundation: the per-process context (stream, cuBLASLt), the caching allocator and
// its statistics, copies and memsets, and the device summary.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../testing.h"
#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/device_memory_stats.h"

namespace biofm {

std::string cuda_device_summary();  // device_memory_cuda.cpp

namespace {

#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no GPU visible"

constexpr size_t kMiB = size_t(1) << 20;

TEST(CudaCore, DeviceSummary) {
  REQUIRE_GPU();
  const std::string s = cuda_device_summary();
  std::printf("[core] %s\n", s.c_str());
  EXPECT_NE(s.find("SMs"), std::string::npos) << s;
  EXPECT_NE(s.find("cuBLASLt"), std::string::npos) << s;
  EXPECT_NE(s.find("cuDNN"), std::string::npos) << s;
}

TEST(CudaCore, ContextIsOneNonBlockingStream) {
  REQUIRE_GPU();
  cudaStream_t s = cuda_ctx::stream();
  ASSERT_NE(s, nullptr);  // never the legacy default stream
  EXPECT_EQ(cuda_ctx::stream(), s);
  unsigned flags = 0;
  BIOFM_CUDA_CHECK(cudaStreamGetFlags(s, &flags));
  EXPECT_TRUE(flags & cudaStreamNonBlocking);
  EXPECT_GT(cuda_ctx::sm_count(), 0);
  EXPECT_NE(cuda_ctx::cublaslt(), nullptr);
  EXPECT_NE(cuda_ctx::cublaslt_workspace(), nullptr);
  EXPECT_EQ(cuda_ctx::cublaslt_workspace_size(), 64 * kMiB);
  cuda_ctx::synchronize();
}

TEST(CudaCore, CopyRoundTripAndMemset) {
  REQUIRE_GPU();
  const Tensor h = testkit::randn({1000, 3}, 1);
  const Tensor d = h.to(Device::CUDA);  // H2D
  const Tensor d2 = d.clone();          // D2D
  const Tensor back = d2.to(Device::CPU);  // D2H (synchronises)
  ASSERT_EQ(std::memcmp(back.raw(), h.raw(), h.nbytes()), 0);
  Tensor z = d.clone();
  z.zero_();
  const Tensor zb = z.to(Device::CPU);
  for (int64_t i = 0; i < zb.numel(); ++i) ASSERT_EQ(zb.f32()[i], 0.0f);
  // fill_ on the device goes through a host staging copy.
  Tensor f = Tensor::empty({17}, DType::F32, Device::CUDA);
  f.fill_(2.5f);
  const Tensor fb = f.to(Device::CPU);
  for (int64_t i = 0; i < 17; ++i) ASSERT_EQ(fb.f32()[i], 2.5f);
  // Views: a copy into the middle of a device buffer.
  Tensor buf = Tensor::zeros({10}, DType::F32, Device::CUDA);
  Tensor mid = buf.flat_slice(3, {4});
  mid.copy_from(Tensor::from_f32({4}, {1, 2, 3, 4}));
  const Tensor bb = buf.to(Device::CPU);
  const float want[10] = {0, 0, 0, 1, 2, 3, 4, 0, 0, 0};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(bb.f32()[i], want[i]);
}

TEST(CudaCore, AllocatorReusesFreedBlocks) {
  REQUIRE_GPU();
  cuda_ctx::synchronize();
  void* a = device_alloc(1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  const DeviceMemoryStats s0 = device_memory_stats();
  device_free(a, 1000);
  const DeviceMemoryStats s1 = device_memory_stats();
  EXPECT_EQ(s1.allocated_bytes + 1024, s0.allocated_bytes);  // 1000 rounds to 1024
  EXPECT_EQ(s1.cached_bytes, s0.cached_bytes + 1024);
  EXPECT_EQ(s1.reserved_bytes, s0.reserved_bytes);
  void* b = device_alloc(1010);  // same 1024-byte bucket: the cached block comes back
  EXPECT_EQ(b, a);
  const DeviceMemoryStats s2 = device_memory_stats();
  EXPECT_EQ(s2.cache_hits, s1.cache_hits + 1);
  EXPECT_EQ(s2.cuda_mallocs, s1.cuda_mallocs);
  EXPECT_EQ(s2.requested_bytes, s1.requested_bytes + 1010);
  // A much larger request does not take a small cached block, nor a small one a large block.
  device_free(b, 1010);
  void* big = device_alloc(64 * kMiB);
  EXPECT_NE(big, b);
  device_free(big, 64 * kMiB);
  void* small = device_alloc(512);
  EXPECT_NE(small, big);
  device_free(small, 512);
  // Large requests round to 2 MiB.
  const DeviceMemoryStats s3 = device_memory_stats();
  void* odd = device_alloc(3 * kMiB + 1);
  EXPECT_EQ(device_memory_stats().allocated_bytes, s3.allocated_bytes + 4 * kMiB);
  device_free(odd, 3 * kMiB + 1);
  EXPECT_EQ(device_memory_stats().allocated_bytes, s3.allocated_bytes);
}

TEST(CudaCore, PeakStatistics) {
  REQUIRE_GPU();
  device_memory_reset_peak();
  const DeviceMemoryStats s0 = device_memory_stats();
  EXPECT_EQ(s0.peak_allocated_bytes, s0.allocated_bytes);
  {
    Tensor a = Tensor::empty({16 * 1024 * 1024}, DType::F32, Device::CUDA);  // 64 MiB
    Tensor b = Tensor::empty({8 * 1024 * 1024}, DType::F32, Device::CUDA);   // 32 MiB
    const DeviceMemoryStats s1 = device_memory_stats();
    EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes + 96 * kMiB);
    EXPECT_GE(s1.peak_allocated_bytes, s0.allocated_bytes + 96 * kMiB);
    EXPECT_GE(s1.alloc_count, s0.alloc_count + 2);
  }
  const DeviceMemoryStats s2 = device_memory_stats();
  EXPECT_EQ(s2.allocated_bytes, s0.allocated_bytes);
  EXPECT_GE(s2.peak_allocated_bytes, s0.allocated_bytes + 96 * kMiB);
  EXPECT_GE(s2.cached_bytes, 96 * kMiB);
  EXPECT_GE(s2.peak_reserved_bytes, s2.reserved_bytes);
  // Releasing the cache returns it to the driver; live allocations are untouched.
  device_memory_release_cache();
  const DeviceMemoryStats s3 = device_memory_stats();
  EXPECT_EQ(s3.cached_bytes, 0u);
  EXPECT_EQ(s3.allocated_bytes, s2.allocated_bytes);
  EXPECT_EQ(s3.reserved_bytes, s3.allocated_bytes);
}

TEST(CudaCore, LargeAllocation) {
  REQUIRE_GPU();
  const int64_t n = int64_t(3) << 30;  // 3 GiB of bytes, as U8
  Tensor t = Tensor::empty({n}, DType::U8, Device::CUDA);
  t.zero_();
  // Write the last bytes and read them back together with some zeros before them.
  std::vector<uint8_t> tail = {1, 2, 3, 4};
  device_copy(static_cast<char*>(t.raw()) + n - 4, Device::CUDA, tail.data(), Device::CPU, 4);
  std::vector<uint8_t> back(8, 0xff);
  device_copy(back.data(), Device::CPU, static_cast<char*>(t.raw()) + n - 8, Device::CUDA, 8);
  const std::vector<uint8_t> want = {0, 0, 0, 0, 1, 2, 3, 4};
  EXPECT_EQ(back, want);
  EXPECT_GE(device_memory_stats().allocated_bytes, size_t(n));
}

TEST(CudaCore, ZeroSize) {
  REQUIRE_GPU();
  EXPECT_EQ(device_alloc(0), nullptr);
  device_free(nullptr, 0);
  Tensor t = Tensor::empty({0, 5}, DType::F32, Device::CUDA);
  EXPECT_EQ(t.numel(), 0);
  t.zero_();
  const Tensor h = t.to(Device::CPU);
  EXPECT_EQ(h.numel(), 0);
  Tensor u = Tensor::empty({0}, DType::BF16, Device::CUDA);
  u.copy_from(Tensor::empty({0}, DType::BF16));
  device_copy(nullptr, Device::CUDA, nullptr, Device::CPU, 0);
}

TEST(CudaCore, OutOfMemoryIsAClearError) {
  REQUIRE_GPU();
  // Something cached first, so the flush-and-retry path runs too.
  { Tensor keep = Tensor::empty({1024}, DType::F32, Device::CUDA); }
  const size_t huge = size_t(1) << 50;  // 1 PiB
  const DeviceMemoryStats s0 = device_memory_stats();
  try {
    device_alloc(huge);
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(huge)), std::string::npos) << msg;
    EXPECT_NE(msg.find("in use"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cached"), std::string::npos) << msg;
  }
  EXPECT_EQ(device_memory_stats().allocated_bytes, s0.allocated_bytes);
  // The device is still usable afterwards.
  const Tensor h = testkit::randn({33}, 2);
  const Tensor back = h.to(Device::CUDA).to(Device::CPU);
  EXPECT_EQ(std::memcmp(back.raw(), h.raw(), h.nbytes()), 0);
}

TEST(CudaCore, StressReuseKeepsData) {
  REQUIRE_GPU();
  // Many allocate / free cycles of mixed sizes, each tensor checked after its neighbours
  // were freed and reallocated: reuse never hands out a live block.
  std::vector<Tensor> live;
  std::vector<Tensor> expect;
  for (int round = 0; round < 200; ++round) {
    const int64_t n = 1 + (round * 7919) % 300000;
    Tensor h = testkit::randn({n}, 100 + round);
    live.push_back(h.to(Device::CUDA));
    expect.push_back(h);
    if (round % 3 == 2) {
      live.erase(live.begin());
      expect.erase(expect.begin());
    }
  }
  for (size_t i = 0; i < live.size(); ++i) {
    const Tensor b = live[i].to(Device::CPU);
    ASSERT_EQ(std::memcmp(b.raw(), expect[i].raw(), b.nbytes()), 0) << "tensor " << i;
  }
}

}  // namespace
}  // namespace biofm
