// Device memory accounting of the CUDA caching allocator (device_memory_cuda.cpp).
// Safe to include from any build: a CPU-only build reports zeros
// (device_memory_stats_cpuonly.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

namespace biofm {

struct DeviceMemoryStats {
  size_t allocated_bytes = 0;       // held by live allocations (rounded block sizes)
  size_t requested_bytes = 0;       // what the live allocations asked for
  size_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes
  size_t cached_bytes = 0;          // freed blocks kept for reuse
  size_t reserved_bytes = 0;        // allocated + cached: what cudaMalloc holds
  size_t peak_reserved_bytes = 0;   // high-water mark of reserved_bytes
  uint64_t alloc_count = 0;         // device_alloc calls
  uint64_t free_count = 0;          // device_free calls
  uint64_t cache_hits = 0;          // allocations served from the cache
  uint64_t cuda_mallocs = 0;        // cudaMalloc calls that succeeded
  uint64_t cache_flushes = 0;       // times the cache was emptied to retry a failed cudaMalloc
};

DeviceMemoryStats device_memory_stats();
// Starts the peak counters again from the current values.
void device_memory_reset_peak();
// Returns every cached (free) block to the driver; waits for the device first.
void device_memory_release_cache();

// The end of a process that used the GPU (main, the CUDA tests' teardown): library handles and
// workspaces (cuDNN's through the hooks below, cuBLASLt's) are destroyed and cached blocks go
// back to the driver, so that compute-sanitizer's leak check reports only memory something
// still holds. An op run afterwards creates what it needs again. Never throws (it reports).
void device_release_at_exit() noexcept;
// Registers a function device_release_at_exit() calls first (e.g. the cuDNN handle's owner).
void on_device_release(void (*hook)());

}  // namespace biofm
