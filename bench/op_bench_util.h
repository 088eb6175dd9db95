// Shared by the standalone CUDA op benchmarks (mlp_gelu_bench.cpp, norm_bias_bench.cpp): random
// bf16 inputs on the GPU and CUDA-event timing on the op stream.
#pragma once
#include <cuda_runtime.h>

#include "biofm/core/cuda_context.h"
#include "biofm/core/rng.h"
#include "biofm/core/tensor.h"

namespace biofm::bench {

// Normal(0, scale²) values, rounded to bf16, on the GPU.
inline Tensor random_gpu(const Shape& s, uint64_t seed, float scale) {
  Tensor h = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < h.numel(); ++i) h.f32()[i] = scale * rng_normal(seed, RngStream::Eval, uint64_t(i), 0);
  return h.to(DType::BF16).to(Device::CUDA);
}

// Milliseconds per call of fn, over `iters` calls after 3 untimed ones.
template <class Fn>
double time_ms(int iters, Fn&& fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, cuda_ctx::stream());
  for (int i = 0; i < iters; ++i) fn();
  cudaEventRecord(e1, cuda_ctx::stream());
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms / iters;
}

}  // namespace biofm::bench
