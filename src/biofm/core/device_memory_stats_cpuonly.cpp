// CPU-only build: there is no device memory to account for.
#include "biofm/core/device_memory_stats.h"

namespace biofm {
DeviceMemoryStats device_memory_stats() { return {}; }
void device_memory_reset_peak() {}
void device_memory_release_cache() {}
void device_release_at_exit() noexcept {}
void on_device_release(void (*)()) {}
}  // namespace biofm
