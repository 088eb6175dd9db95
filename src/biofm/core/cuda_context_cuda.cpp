// Per-process CUDA state: one non-blocking compute stream (and a side stream for work beside
// it, core/side_stream.h), the cuBLASLt handle and its workspaces, and device
// properties. Everything is created on first use, on the device that
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
  cudaStream_t side = nullptr;  // created on first use
};

thread_local cudaStream_t t_current = nullptr;  // null: the compute stream

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
  // GEMMs on the side stream may run while compute-stream GEMMs do: their own workspace.
  std::atomic<void*> side_workspace{nullptr};
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

cudaStream_t stream() { return t_current ? t_current : context().stream; }

cudaStream_t compute_stream() { return context().stream; }

cudaStream_t side_stream() {
  Context& c = context();
  static std::once_flag once;
  // (the compute stream's default priority: a higher one for the compute stream measured no
  // different, bench/wgrad_overlap_bench.cu)
  std::call_once(once, [&] { BIOFM_CUDA_CHECK(cudaStreamCreateWithFlags(&c.side, cudaStreamNonBlocking)); });
  return c.side;
}

void set_current_stream(cudaStream_t s) { t_current = s == context().stream ? nullptr : s; }

cublasLtHandle_t cublaslt() { return cublaslt_state().handle; }

void* cublaslt_workspace() {
  CublasLt& s = cublaslt_state();
  if (!t_current || t_current != context().side) return s.workspace;
  if (void* w = s.side_workspace.load(std::memory_order_acquire)) return w;
  std::lock_guard<std::mutex> lock(g_lt_mutex);
  if (!s.side_workspace.load(std::memory_order_relaxed)) s.side_workspace.store(device_alloc(kCublasLtWorkspaceBytes));
  return s.side_workspace.load(std::memory_order_relaxed);
}

size_t cublaslt_workspace_size() { return kCublasLtWorkspaceBytes; }

int sm_count() { return context().sms; }

void synchronize() { BIOFM_CUDA_CHECK(cudaStreamSynchronize(stream())); }

void release_cublaslt() {
  std::lock_guard<std::mutex> lock(g_lt_mutex);
  std::unique_ptr<CublasLt> s(g_lt.exchange(nullptr));
  if (!s) return;
  BIOFM_CUDA_CHECK(cudaDeviceSynchronize());  // GEMMs queued on either stream may still use a workspace
  device_free(s->workspace, kCublasLtWorkspaceBytes);
  if (void* w = s->side_workspace.load()) device_free(w, kCublasLtWorkspaceBytes);
  BIOFM_CUBLAS_CHECK(cublasLtDestroy(s->handle));
}

}  // namespace biofm::cuda_ctx
