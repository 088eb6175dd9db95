// Device memory hooks used by Storage. In a CPU-only build these fail with a clear
// message; the CUDA build provides them from the caching allocator.
#pragma once
#include <cstddef>

#include "biofm/core/dtype.h"

namespace biofm {
bool cuda_available();
// GPUs visible to this process (0 without CUDA).
int cuda_device_count();
// Makes GPU (local_rank mod the visible GPUs) current for this process: a multi-process run
// calls it before any CUDA work, one GPU per local rank.
void select_cuda_device(int local_rank);
void* device_alloc(size_t bytes);
void device_free(void* ptr, size_t bytes);
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void device_memset_zero(void* ptr, size_t bytes);
}  // namespace biofm
