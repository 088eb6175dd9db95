// GpuMonitor over NVML, opened with dlopen: the driver installs libnvidia-ml.so.1 beside
// libcuda, and a machine without it still runs everything else. The few NVML entry points used
// here are declared by hand (NVML's C ABI: handles are pointers, enums ints, 0 is success).
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>

#include "biofm/core/gpu_monitor.h"

namespace biofm {

namespace {

using nvmlDevice = void*;
constexpr int kClockSm = 1, kTemperatureGpu = 0;

struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*by_pci)(const char*, nvmlDevice*) = nullptr;
  int (*clock)(nvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock)(nvmlDevice, int, unsigned*) = nullptr;
  int (*power)(nvmlDevice, unsigned*) = nullptr;
  int (*power_limit)(nvmlDevice, unsigned*) = nullptr;
  int (*temperature)(nvmlDevice, int, unsigned*) = nullptr;
  int (*reasons)(nvmlDevice, unsigned long long*) = nullptr;

  // Empty string on success, else why not.
  std::string open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "libnvidia-ml.so.1 not found";
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    if (!sym(init, "nvmlInit_v2") || !sym(by_pci, "nvmlDeviceGetHandleByPciBusId_v2") || !sym(clock, "nvmlDeviceGetClockInfo") ||
        !sym(max_clock, "nvmlDeviceGetMaxClockInfo") || !sym(power, "nvmlDeviceGetPowerUsage") ||
        !sym(power_limit, "nvmlDeviceGetEnforcedPowerLimit") || !sym(temperature, "nvmlDeviceGetTemperature"))
      return "an NVML function is missing";
    // The newer name first (drivers 535+), then the one it replaced.
    if (!sym(reasons, "nvmlDeviceGetCurrentClocksEventReasons")) sym(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (init() != 0) return "nvmlInit failed";
    return "";
  }
};

// NVML opened and initialised once per process and left open: training makes a monitor per
// logging window, and dlopen + nvmlInit each time would stall the training thread there.
const Nvml& nvml_once(std::string* why) {
  static Nvml nvml;
  static const std::string error = nvml.open();
  *why = error;
  return nvml;
}

}  // namespace

struct GpuMonitor::Impl {
  const Nvml& nvml;
  nvmlDevice dev = nullptr;
  std::string why;
  double clock_limit = 0, power_limit = 0;
  std::vector<GpuSample> samples;
  std::mutex m;
  std::condition_variable cv;
  bool stopping = false;
  std::thread thread;

  void sample() {
    GpuSample s;
    unsigned v = 0;
    if (nvml.clock(dev, kClockSm, &v) == 0) s.sm_clock_mhz = v;
    if (nvml.power(dev, &v) == 0) s.power_w = v / 1000.0;
    if (nvml.temperature(dev, kTemperatureGpu, &v) == 0) s.temperature_c = v;
    unsigned long long r = 0;
    if (nvml.reasons && nvml.reasons(dev, &r) == 0) s.slowdown_reasons = r;
    samples.push_back(s);
  }
};

GpuMonitor::GpuMonitor(int interval_ms) {
  std::string why;
  const Nvml& nvml = nvml_once(&why);
  impl_.reset(new Impl{nvml});
  Impl& im = *impl_;
  im.why = why;
  if (im.why.empty()) {
    int device = 0;
    char bus[32] = {};
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
      (void)cudaGetLastError();  // (not left for the next CUDA call to report)
      im.why = "no CUDA device";
    }
    else if (im.nvml.by_pci(bus, &im.dev) != 0)
      im.why = std::string("NVML does not know the GPU at ") + bus;
  }
  if (!im.why.empty()) return;
  unsigned v = 0;
  if (im.nvml.max_clock(im.dev, kClockSm, &v) == 0) im.clock_limit = v;
  if (im.nvml.power_limit(im.dev, &v) == 0) im.power_limit = v / 1000.0;
  // The first sample one interval in: the stretch being watched has started by then.
  im.thread = std::thread([&im, interval_ms] {
    std::unique_lock<std::mutex> lock(im.m);
    while (!im.cv.wait_for(lock, std::chrono::milliseconds(interval_ms), [&] { return im.stopping; })) im.sample();
  });
}

GpuActivity GpuMonitor::stop() {
  Impl& im = *impl_;
  GpuActivity a;
  if (im.thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(im.m);
      im.stopping = true;
    }
    im.cv.notify_all();
    im.thread.join();
  }
  if (!im.why.empty() || im.samples.empty()) {
    a.why = im.why.empty() ? "no samples" : im.why;
  } else {
    a = summarize_gpu_samples(im.samples, im.clock_limit, im.power_limit);
  }
  return a;
}

GpuMonitor::~GpuMonitor() { stop(); }

}  // namespace biofm
