#include "biofm/core/gpu_monitor.h"

#include <algorithm>
#include <cstdio>

#include "biofm/core/error.h"

namespace biofm {

GpuActivity summarize_gpu_samples(const std::vector<GpuSample>& samples, double sm_clock_limit_mhz,
                                  double power_limit_w) {
  if (samples.empty()) fail("summarize_gpu_samples: no samples");
  GpuActivity a;
  a.available = true;
  a.samples = int64_t(samples.size());
  a.sm_clock_limit_mhz = sm_clock_limit_mhz;
  a.power_limit_w = power_limit_w;
  std::vector<double> clock, power;
  int64_t capped = 0, thermal = 0;
  for (const GpuSample& s : samples) {
    clock.push_back(s.sm_clock_mhz);
    power.push_back(s.power_w);
    a.temperature_max_c = std::max(a.temperature_max_c, s.temperature_c);
    capped += (s.slowdown_reasons & (kNvmlSwPowerCap | kNvmlHwPowerBrake)) != 0;
    thermal += (s.slowdown_reasons & (kNvmlSwThermal | kNvmlHwThermal)) != 0;
  }
  // The median of an even count is the mean of the middle two.
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  a.sm_clock_median_mhz = median(clock);
  a.sm_clock_min_mhz = *std::min_element(clock.begin(), clock.end());
  a.sm_clock_max_mhz = *std::max_element(clock.begin(), clock.end());
  a.power_median_w = median(power);
  a.power_max_w = *std::max_element(power.begin(), power.end());
  a.power_capped_fraction = double(capped) / double(samples.size());
  a.thermal_fraction = double(thermal) / double(samples.size());
  return a;
}

std::string describe(const GpuActivity& a) {
  if (!a.available) return "not measured: " + a.why;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "SM clock median %.0f MHz (%.0f-%.0f, max %.0f), power %.0f W median of a %.0f W limit, "
                "power-capped in %.0f%% of samples, %.0f C max (%lld samples)",
                a.sm_clock_median_mhz, a.sm_clock_min_mhz, a.sm_clock_max_mhz, a.sm_clock_limit_mhz,
                a.power_median_w, a.power_limit_w, 100 * a.power_capped_fraction, a.temperature_max_c,
                (long long)a.samples);
  std::string s = buf;
  if (a.thermal_fraction > 0) {
    std::snprintf(buf, sizeof buf, ", slowed for temperature in %.0f%%", 100 * a.thermal_fraction);
    s += buf;
  }
  return s;
}

}  // namespace biofm
