// Device memory hooks used by Storage. In a CPU-only build these fail with a clear
// message; the CUDA build provides them from the caching allocator.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

#include "biofm/core/dtype.h"

namespace biofm {
bool cuda_available();
// GPUs visible to this process (0 without CUDA).
int cuda_device_count();
// The current GPU's compute capability as major*10 + minor (90 for H100; 0 without CUDA).
int cuda_compute_capability();
// Makes GPU (local_rank mod the visible GPUs) current for this process: a multi-process run
// calls it before any CUDA work, one GPU per local rank.
void select_cuda_device(int local_rank);
void* device_alloc(size_t bytes);
void device_free(void* ptr, size_t bytes);
// While `list` is set, device_free on this thread appends to it instead of returning the block to
// the allocator (null: back to normal). For work queued on a stream other than the compute
// stream (core/side_stream.h): its blocks are freed for real once that work has run.
// Returns the list that was set before (so that scopes can nest).
using DeferredFrees = std::vector<std::pair<void*, size_t>>;
DeferredFrees* device_defer_frees(DeferredFrees* list);
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void device_memset_zero(void* ptr, size_t bytes);
// Page-locked host memory: copies between it and the GPU run asynchronously, in stream order.
void* host_alloc_pinned(size_t bytes);
void host_free_pinned(void* ptr);
// device_copy without waiting for a copy to the host: its bytes may be read only after
// device_synchronize(). Host memory involved should be pinned (pageable memory makes the copy
// synchronous). Host to host: a plain memcpy.
void device_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
// Waits until everything queued on the compute stream has run.
void device_synchronize();
}  // namespace biofm
