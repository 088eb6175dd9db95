// Per-process CUDA state shared by every CUDA op: the compute stream, the cuBLASLt and
// cuDNN handles and their workspaces. Only included by CUDA-build sources (*.cu, *_cuda.cpp).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "biofm/core/error.h"

#define BIOFM_CUDA_CHECK(expr)                                                              \
  do {                                                                                      \
    cudaError_t err_ = (expr);                                                              \
    if (err_ != cudaSuccess)                                                                \
      ::biofm::fail(__FILE__, ":", __LINE__, ": CUDA error ", cudaGetErrorName(err_), " (", \
                    cudaGetErrorString(err_), ") in " #expr);                               \
  } while (0)

#define BIOFM_CUBLAS_CHECK(expr)                                                            \
  do {                                                                                      \
    cublasStatus_t st_ = (expr);                                                            \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      ::biofm::fail(__FILE__, ":", __LINE__, ": cuBLAS error ", int(st_), " in " #expr);    \
  } while (0)

// After a kernel launch: report launch-configuration errors at once (no device sync).
#define BIOFM_CUDA_LAUNCH_CHECK() BIOFM_CUDA_CHECK(cudaGetLastError())

namespace biofm::cuda_ctx {

cudaStream_t stream();                 // the stream every op enqueues on: the compute stream,
                                       // or the side stream inside a side_stream::Scope
cudaStream_t compute_stream();         // the compute stream, always
cudaStream_t side_stream();            // a second stream, same priority (core/side_stream.h)
void set_current_stream(cudaStream_t s);  // what stream() returns on this thread (null: compute)
cublasLtHandle_t cublaslt();           // created on first use
void* cublaslt_workspace();            // 64 MiB, for cuBLASLt algorithms (one per stream)
size_t cublaslt_workspace_size();
int sm_count();
void synchronize();                    // stream sync, with error check
void release_cublaslt();               // destroys the handle, frees the workspace (next use recreates)

}  // namespace biofm::cuda_ctx
