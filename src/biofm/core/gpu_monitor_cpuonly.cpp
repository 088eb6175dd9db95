// CPU-only build: no GPU to watch.
#include "biofm/core/gpu_monitor.h"

namespace biofm {

struct GpuMonitor::Impl {};
GpuMonitor::GpuMonitor(int) {}
GpuMonitor::~GpuMonitor() = default;
GpuActivity GpuMonitor::stop() {
  GpuActivity a;
  a.why = "this biofm was built without CUDA";
  return a;
}

}  // namespace biofm
