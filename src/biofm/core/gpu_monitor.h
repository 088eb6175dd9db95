// What the GPU's clock and power did during a stretch of work, sampled through NVML on a thread
// (every 100 ms by default). An H100 at its 700 W limit lowers its SM clock under dense bf16
// GEMMs (to 1,670-1,770 MHz from 1,980 in session 18's measurements), so one program runs at
// different speeds on a cool and on a hot GPU; `biofm bench` reports this beside its throughput.
// NVML is the driver's library, opened at run time (libnvidia-ml.so.1); without it, or in a
// CPU-only build, the monitor reports itself unavailable and nothing else changes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace biofm {

struct GpuSample {
  double sm_clock_mhz = 0, power_w = 0, temperature_c = 0;
  uint64_t slowdown_reasons = 0;  // NVML's clocks event reasons (bit mask, below)
};
// NVML reason bits that lower the clock under load.
inline constexpr uint64_t kNvmlSwPowerCap = 0x4, kNvmlSwThermal = 0x20, kNvmlHwThermal = 0x40,
                          kNvmlHwPowerBrake = 0x80;

struct GpuActivity {
  bool available = false;
  std::string why;  // why not available
  int64_t samples = 0;
  double sm_clock_median_mhz = 0, sm_clock_min_mhz = 0, sm_clock_max_mhz = 0;
  double sm_clock_limit_mhz = 0;  // the GPU's highest SM clock
  double power_median_w = 0, power_max_w = 0, power_limit_w = 0;
  double temperature_max_c = 0;
  double power_capped_fraction = 0;  // samples slowed by the power limit (software cap or power brake)
  double thermal_fraction = 0;       // samples slowed for temperature (software or hardware)
};

// The summary of samples (at least one) and the GPU's limits.
GpuActivity summarize_gpu_samples(const std::vector<GpuSample>& samples, double sm_clock_limit_mhz,
                                  double power_limit_w);
// One line: "SM clock median 1770 MHz (1590-1980, max 1980), power 691 W median of a 700 W limit,
// power-capped in 95% of samples, 75 C max (62 samples)", or "not measured: <why>".
std::string describe(const GpuActivity& a);

// Samples the current CUDA device every interval from construction until stop(). (NVML's power
// reading on Hopper is itself an average over about a second.)
class GpuMonitor {
 public:
  explicit GpuMonitor(int interval_ms = 100);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;
  GpuActivity stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace biofm
