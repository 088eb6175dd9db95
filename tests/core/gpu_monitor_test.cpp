#include "biofm/core/gpu_monitor.h"

#include <gtest/gtest.h>

#include "biofm/core/device_memory.h"
#include "biofm/core/error.h"

namespace biofm {
namespace {

GpuSample sample(double mhz, double w, double c, uint64_t reasons) {
  GpuSample s;
  s.sm_clock_mhz = mhz, s.power_w = w, s.temperature_c = c, s.slowdown_reasons = reasons;
  return s;
}

TEST(GpuMonitor, SummaryOfSamples) {
  // Four samples under load: two at the power cap (one through the power brake), one slowed for
  // temperature, one idle-fast.
  const std::vector<GpuSample> s = {sample(1770, 691, 70, kNvmlSwPowerCap), sample(1590, 701, 75, kNvmlHwPowerBrake),
                                    sample(1980, 650, 72, 0), sample(1700, 600, 80, kNvmlHwThermal)};
  const GpuActivity a = summarize_gpu_samples(s, 1980, 700);
  EXPECT_TRUE(a.available);
  EXPECT_EQ(a.samples, 4);
  EXPECT_DOUBLE_EQ(a.sm_clock_median_mhz, (1700 + 1770) / 2.0);  // even count: mean of the middle two
  EXPECT_DOUBLE_EQ(a.sm_clock_min_mhz, 1590);
  EXPECT_DOUBLE_EQ(a.sm_clock_max_mhz, 1980);
  EXPECT_DOUBLE_EQ(a.power_median_w, (650 + 691) / 2.0);
  EXPECT_DOUBLE_EQ(a.power_max_w, 701);
  EXPECT_DOUBLE_EQ(a.power_limit_w, 700);
  EXPECT_DOUBLE_EQ(a.temperature_max_c, 80);
  EXPECT_DOUBLE_EQ(a.power_capped_fraction, 0.5);
  EXPECT_DOUBLE_EQ(a.thermal_fraction, 0.25);
  const std::string line = describe(a);
  EXPECT_NE(line.find("SM clock median 1735 MHz (1590-1980, max 1980)"), std::string::npos) << line;
  EXPECT_NE(line.find("power-capped in 50% of samples"), std::string::npos) << line;
  EXPECT_NE(line.find("slowed for temperature in 25%"), std::string::npos) << line;
  // Odd count: the middle one.
  EXPECT_DOUBLE_EQ(summarize_gpu_samples({s[0], s[1], s[2]}, 1980, 700).sm_clock_median_mhz, 1770);
  EXPECT_THROW(summarize_gpu_samples({}, 1980, 700), Error);
}

TEST(GpuMonitor, ReportsSamplesOrWhyNot) {
  GpuMonitor m;
  const GpuActivity a = m.stop();
  if (!cuda_available()) EXPECT_FALSE(a.available);
  if (a.available) {
    EXPECT_GE(a.samples, 1);
  } else {
    EXPECT_FALSE(a.why.empty());
    EXPECT_EQ(describe(a).rfind("not measured: ", 0), 0u);
  }
}

}  // namespace
}  // namespace biofm
