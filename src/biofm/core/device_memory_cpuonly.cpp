// CPU-only build: there is no device memory.
#include "biofm/core/device_memory.h"
#include <cstring>
#include <string>

#include "biofm/core/error.h"

namespace biofm {
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
int cuda_compute_capability() { return 0; }
void select_cuda_device(int) { fail("this biofm was built without CUDA; use device=cpu"); }
void* device_alloc(size_t) { fail("this biofm was built without CUDA; use device=cpu"); }
void device_free(void*, size_t) {}
DeferredFrees* device_defer_frees(DeferredFrees*) { return nullptr; }
void device_copy(void*, Device, const void*, Device, size_t) {
  fail("this biofm was built without CUDA; use device=cpu");
}
void device_memset_zero(void*, size_t) { fail("this biofm was built without CUDA; use device=cpu"); }
void* host_alloc_pinned(size_t) { fail("this biofm was built without CUDA: no pinned host memory"); }
void host_free_pinned(void*) {}
void device_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (dst_dev != Device::CPU || src_dev != Device::CPU) fail("this biofm was built without CUDA; use device=cpu");
  if (bytes) std::memcpy(dst, src, bytes);
}
void device_synchronize() {}
}  // namespace biofm

namespace biofm {
std::string cuda_device_summary() { return "not built"; }
}  // namespace biofm
