// range_timer's CUDA marks: events recorded on a stream (the compute stream unless another is
// named), read back once the window is taken.
#include "biofm/core/cuda_context.h"
#include "biofm/core/range_timer.h"

namespace biofm::range_timer::detail {

void* record_event(void* stream) {
  cudaEvent_t e = nullptr;
  BIOFM_CUDA_CHECK(cudaEventCreate(&e));
  BIOFM_CUDA_CHECK(cudaEventRecord(e, stream ? static_cast<cudaStream_t>(stream) : cuda_ctx::stream()));
  return e;
}

float elapsed_ms(void* start, void* end) {
  BIOFM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end)));
  float ms = 0.0f;
  BIOFM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

void destroy_event(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

}  // namespace biofm::range_timer::detail
