// Per-process CUDA state: one non-blocking compute stream, the cuBLASLt handle and its
// workspace, and device properties. Everything is created on first use, on the device that
// is current at that moment (the launcher selects it with cudaSetDevice before any op runs),
// and never destroyed by static destructors (tearing CUDA objects down there races the
// runtime's own shutdown): release_cublaslt() frees the handle and workspace explicitly, at the
// end of main (device_release_at_exit), so that a leak check sees nothing held.
#include "biofm/core/cuda_context.h"

#include "biofm/core/device_memory.h"

#include <atomic>
#include <memory>
#include <mutex>

namespace biofm::cuda_ctx {

namespace {

constexpr size_t kCublasLtWorkspaceBytes = size_t(64) << 20;  // 64 MiB (Hopper wants >= 32 MiB)

struct Context {
  int device = -1;
  int sms = 0;
  cudaStream_t stream = nullptr;
};

// Initialised once; if creation throws, the next call tries again.
Context& context() {
  static Context* ctx = [] {
    auto* c = new Context;
    BIOFM_CUDA_CHECK(cudaGetDevice(&c->device));
    BIOFM_CUDA_CHECK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, c->device));
    BIOFM_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    return c;
  }();
  return *ctx;
}

struct CublasLt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

std::mutex g_lt_mutex;
std::atomic<CublasLt*> g_lt{nullptr};

CublasLt& cublaslt_state() {
  if (CublasLt* s = g_lt.load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(g_lt_mutex);
  if (CublasLt* s = g_lt.load(std::memory_order_relaxed)) return *s;
  context();  // the stream and device first
  auto s = std::make_unique<CublasLt>();
  BIOFM_CUBLAS_CHECK(cublasLtCreate(&s->handle));
  // Through the caching allocator, so memory statistics include it.
  s->workspace = device_alloc(kCublasLtWorkspaceBytes);
  g_lt.store(s.get(), std::memory_order_release);
  return *s.release();
}

}  // namespace

cudaStream_t stream() { return context().stream; }

cublasLtHandle_t cublaslt() { return cublaslt_state().handle; }

void* cublaslt_workspace() { return cublaslt_state().workspace; }

size_t cublaslt_workspace_size() { return kCublasLtWorkspaceBytes; }

int sm_count() { return context().sms; }

void synchronize() { BIOFM_CUDA_CHECK(cudaStreamSynchronize(stream())); }

void release_cublaslt() {
  std::lock_guard<std::mutex> lock(g_lt_mutex);
  std::unique_ptr<CublasLt> s(g_lt.exchange(nullptr));
  if (!s) return;
  BIOFM_CUDA_CHECK(cudaStreamSynchronize(stream()));  // GEMMs queued may still use the workspace
  device_free(s->workspace, kCublasLtWorkspaceBytes);
  BIOFM_CUBLAS_CHECK(cublasLtDestroy(s->handle));
}

}  // namespace biofm::cuda_ctx
