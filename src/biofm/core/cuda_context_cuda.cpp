// Per-process CUDA state: one non-blocking compute stream, the cuBLASLt handle and its
// workspace, and device properties. Everything is created on first use, on the device that
// is current at that moment (the launcher selects it with cudaSetDevice before any op runs),
// and deliberately never destroyed: tearing CUDA objects down from static destructors races
// the runtime's own shutdown.
#include "biofm/core/cuda_context.h"

#include "biofm/core/device_memory.h"

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

CublasLt& cublaslt_state() {
  static CublasLt* st = [] {
    context();  // the stream and device first
    auto* s = new CublasLt;
    BIOFM_CUBLAS_CHECK(cublasLtCreate(&s->handle));
    // Through the caching allocator, so memory statistics include it.
    s->workspace = device_alloc(kCublasLtWorkspaceBytes);
    return s;
  }();
  return *st;
}

}  // namespace

cudaStream_t stream() { return context().stream; }

cublasLtHandle_t cublaslt() { return cublaslt_state().handle; }

void* cublaslt_workspace() { return cublaslt_state().workspace; }

size_t cublaslt_workspace_size() { return kCublasLtWorkspaceBytes; }

int sm_count() { return context().sms; }

void synchronize() { BIOFM_CUDA_CHECK(cudaStreamSynchronize(stream())); }

}  // namespace biofm::cuda_ctx
