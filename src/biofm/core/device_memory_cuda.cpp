// Device memory for the CUDA build: a caching allocator over cudaMalloc, copies and memsets
// on the compute stream, and the device summary that `biofm info` prints.
//
// Allocator policy. Requests are rounded up (to 512 B up to 1 MiB, to 2 MiB above) and each
// rounded block is one cudaMalloc. A freed block goes to a free list keyed by size and is
// handed to the next request that it fits best (the smallest cached block of at least the
// rounded size and at most 1/8 larger), never split. Every op runs on the one compute stream
// (cuda_ctx::stream()), so a block freed by the host while kernels that use it are still
// queued is only reused by work queued after them: stream order makes reuse safe without
// events. Work on any other stream (e.g. a communication stream) must hold its own reference
// to the tensors it touches until it has been joined back into the compute stream.
// When cudaMalloc fails, the cache is returned to the driver and the allocation retried once.
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/error.h"

namespace biofm {

namespace {

constexpr size_t kSmallLimit = size_t(1) << 20;  // requests up to 1 MiB...
constexpr size_t kSmallRound = 512;              // ...round to 512 B
constexpr size_t kLargeRound = size_t(2) << 20;  // larger ones to 2 MiB

size_t round_block(size_t bytes) {
  const size_t q = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
  return (bytes + q - 1) / q * q;
}

std::string mib(size_t bytes) {
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << double(bytes) / double(1 << 20) << " MiB";
  return os.str();
}

class CachingAllocator {
 public:
  void* alloc(size_t bytes) {
    if (bytes == 0) return nullptr;
    if (!cuda_available()) fail("device_alloc(", bytes, " bytes): no CUDA device is visible");
    const size_t block = round_block(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++st_.alloc_count;
    size_t got = 0;  // a cached block may be up to 1/8 larger than `block`
    void* p = take_cached(block, &got);
    if (p) {
      ++st_.cache_hits;
    } else {
      p = cuda_malloc(bytes, block);
      got = block;
    }
    live_[p] = Live{got, bytes};
    st_.allocated_bytes += got;
    st_.requested_bytes += bytes;
    st_.peak_allocated_bytes = std::max(st_.peak_allocated_bytes, st_.allocated_bytes);
    update_reserved();
    return p;
  }

  void free(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) {
      std::fprintf(stderr, "biofm: device_free of %p, which the allocator did not hand out\n", p);
      return;
    }
    ++st_.free_count;
    st_.allocated_bytes -= it->second.block;
    st_.requested_bytes -= it->second.requested;
    st_.cached_bytes += it->second.block;
    // Ahead of equal-sized blocks: the most recently freed (likely still in L2) is reused first.
    free_.emplace_hint(free_.lower_bound(it->second.block), it->second.block, p);
    live_.erase(it);
    update_reserved();
  }

  DeviceMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return st_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    st_.peak_allocated_bytes = st_.allocated_bytes;
    st_.peak_reserved_bytes = st_.reserved_bytes;
  }

  void release_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cache_locked();
  }

 private:
  struct Live {
    size_t block;      // rounded size actually held
    size_t requested;  // what the caller asked for
  };

  void update_reserved() {
    st_.reserved_bytes = st_.allocated_bytes + st_.cached_bytes;
    st_.peak_reserved_bytes = std::max(st_.peak_reserved_bytes, st_.reserved_bytes);
  }

  // Best fit among cached blocks: the smallest of at least `block` bytes, if it wastes at
  // most 1/8 of the request (so a small request never takes a large block).
  void* take_cached(size_t block, size_t* got) {
    auto it = free_.lower_bound(block);
    if (it == free_.end() || it->first > block + block / 8) return nullptr;
    void* p = it->second;
    const size_t size = it->first;
    free_.erase(it);
    st_.cached_bytes -= size;
    *got = size;
    return p;
  }

  void* cuda_malloc(size_t bytes, size_t block) {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, block);
    if (err == cudaErrorMemoryAllocation && !free_.empty()) {
      (void)cudaGetLastError();  // allocation failures are not sticky; clear it
      ++st_.cache_flushes;
      release_cache_locked();
      err = cudaMalloc(&p, block);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      const bool have_info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
      (void)cudaGetLastError();
      std::ostringstream os;
      os << "CUDA out of memory: cannot allocate " << bytes << " bytes (" << mib(block)
         << " rounded): " << cudaGetErrorName(err) << "; biofm holds " << st_.allocated_bytes
         << " bytes in use (" << mib(st_.allocated_bytes) << ") and " << st_.cached_bytes
         << " bytes cached (" << mib(st_.cached_bytes) << ", returned to the driver before retrying)";
      if (have_info) os << "; the device has " << mib(free_b) << " free of " << mib(total_b);
      fail(os.str());
    }
    ++st_.cuda_mallocs;
    return p;
  }

  void release_cache_locked() {
    if (free_.empty()) return;
    // Blocks on the free list may still be read by queued kernels; cudaFree synchronises
    // too, but say so explicitly.
    BIOFM_CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& [size, p] : free_) {
      BIOFM_CUDA_CHECK(cudaFree(p));
      st_.cached_bytes -= size;
    }
    free_.clear();
    update_reserved();
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, Live> live_;
  DeviceMemoryStats st_;
};

// Never destroyed: Storage destructors of static tensors may run after static teardown.
std::atomic<CachingAllocator*> g_allocator{nullptr};
CachingAllocator& allocator() {
  static CachingAllocator* a = [] {
    auto* p = new CachingAllocator;
    g_allocator.store(p);
    return p;
  }();
  return *a;
}

cudaMemcpyKind copy_kind(Device dst, Device src) {
  if (dst == Device::CUDA && src == Device::CUDA) return cudaMemcpyDeviceToDevice;
  if (dst == Device::CUDA) return cudaMemcpyHostToDevice;
  return cudaMemcpyDeviceToHost;
}

std::string version3(size_t v, size_t major_div) {
  std::ostringstream os;
  os << v / major_div << "." << (v % major_div) / 100 << "." << v % 100;
  return os.str();
}

}  // namespace

bool cuda_available() {
  static const bool available = [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return n > 0;
  }();
  return available;
}

int cuda_device_count() {
  int n = 0;
  if (!cuda_available() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

int cuda_compute_capability() {
  int dev = 0, major = 0, minor = 0;
  if (!cuda_available() || cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return 0;
  return major * 10 + minor;
}

void select_cuda_device(int local_rank) {
  int n = 0;
  BIOFM_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (n <= 0) fail("no CUDA device is visible");
  BIOFM_CUDA_CHECK(cudaSetDevice(local_rank % n));
}

void* device_alloc(size_t bytes) { return allocator().alloc(bytes); }

namespace {
thread_local DeferredFrees* t_deferred = nullptr;
}

DeferredFrees* device_defer_frees(DeferredFrees* list) {
  DeferredFrees* previous = t_deferred;
  t_deferred = list;
  return previous;
}

void device_free(void* ptr, size_t bytes) {
  if (t_deferred && ptr) {
    t_deferred->emplace_back(ptr, bytes);
    return;
  }
  allocator().free(ptr);
}

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  if (dst_dev == Device::CPU && src_dev == Device::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  cudaStream_t s = cuda_ctx::stream();
  // From pageable host memory the call returns once the source has been staged, so the
  // caller may reuse it at once. (A pinned source is read later, in stream order.)
  BIOFM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, copy_kind(dst_dev, src_dev), s));
  if (dst_dev == Device::CPU) BIOFM_CUDA_CHECK(cudaStreamSynchronize(s));  // the host reads it next
}

void* host_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  BIOFM_CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
  return p;
}

void host_free_pinned(void* ptr) { (void)cudaFreeHost(ptr); }

void device_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  if (dst_dev == Device::CPU && src_dev == Device::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  BIOFM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, copy_kind(dst_dev, src_dev), cuda_ctx::stream()));
}

void device_synchronize() { cuda_ctx::synchronize(); }

void device_memset_zero(void* ptr, size_t bytes) {
  if (bytes == 0) return;
  BIOFM_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, cuda_ctx::stream()));
}

DeviceMemoryStats device_memory_stats() {
  if (!cuda_available()) return {};
  return allocator().stats();
}

void device_memory_reset_peak() {
  if (cuda_available()) allocator().reset_peak();
}

void device_memory_release_cache() {
  // (a process that never allocated on the GPU has nothing cached, and must not start CUDA here)
  if (CachingAllocator* a = g_allocator.load()) a->release_cache();
}

namespace {
std::mutex g_hooks_mutex;
std::vector<void (*)()> g_release_hooks;
}  // namespace

void on_device_release(void (*hook)()) {
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  if (std::find(g_release_hooks.begin(), g_release_hooks.end(), hook) == g_release_hooks.end())
    g_release_hooks.push_back(hook);
}

void device_release_at_exit() noexcept {
  if (!g_allocator.load()) return;  // nothing was ever allocated on the GPU
  try {
    std::vector<void (*)()> hooks;
    {
      std::lock_guard<std::mutex> lock(g_hooks_mutex);
      hooks = g_release_hooks;
    }
    for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
    cuda_ctx::release_cublaslt();
    device_memory_release_cache();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biofm: releasing GPU state at exit: %s\n", e.what());
  }
}

std::string cuda_device_summary() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no GPU visible (") + cudaGetErrorString(err) + ")";
  }
  if (n < 1) return "no GPU visible";
  int dev = 0;
  BIOFM_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  BIOFM_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  int runtime = 0, driver = 0;
  BIOFM_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  BIOFM_CUDA_CHECK(cudaDriverGetVersion(&driver));
  size_t free_b = 0, total_b = 0;
  BIOFM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << "device " << dev << " of " << n << ": " << prop.name << ", sm_" << prop.major
     << prop.minor << ", " << prop.multiProcessorCount << " SMs, "
     << double(total_b) / double(size_t(1) << 30) << " GiB (" << double(free_b) / double(size_t(1) << 30)
     << " GiB free); CUDA runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", driver "
     << driver / 1000 << "." << (driver % 1000) / 10 << "; cuBLASLt "
     << version3(cublasLtGetVersion(), 10000) << "; cuDNN " << version3(cudnnGetVersion(), 10000);
  return os.str();
}

}  // namespace biofm
