// The GPU monitor on a real GPU: NVML opens, and a few samples read a plausible clock, power and
// temperature within the GPU's own limits. (A container without the driver's NVML library
// cannot sample: skipped there, with the reason.)
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "biofm/core/gpu_monitor.h"

namespace biofm {
namespace {

TEST(CudaGpuMonitor, SamplesClockAndPowerWithinTheLimits) {
  GpuMonitor m(20);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const GpuActivity a = m.stop();
  if (a.why == "libnvidia-ml.so.1 not found") GTEST_SKIP() << a.why;
  ASSERT_TRUE(a.available) << a.why;
  EXPECT_GE(a.samples, 3);
  EXPECT_GT(a.sm_clock_limit_mhz, 500);
  EXPECT_GT(a.sm_clock_max_mhz, 0);
  EXPECT_LE(a.sm_clock_max_mhz, a.sm_clock_limit_mhz);
  EXPECT_GT(a.power_limit_w, 50);
  EXPECT_GT(a.power_median_w, 0);
  EXPECT_GT(a.temperature_max_c, 0);
  EXPECT_LT(a.temperature_max_c, 120);
}

}  // namespace
}  // namespace biofm
