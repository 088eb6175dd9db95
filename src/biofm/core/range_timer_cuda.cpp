// range_timer's CUDA marks: events recorded on a stream (the compute stream unless another is
// named), read back once the window is taken.
#include "biofm/core/cuda_context.h"
#include "biofm/core/range_timer.h"

namespace biofm::range_timer::detail {

void* create_event() {
  cudaEvent_t e = nullptr;
  BIOFM_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void record_event(void* event, void* stream) {
  BIOFM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event),
                                   stream ? static_cast<cudaStream_t>(stream) : cuda_ctx::stream()));
}

float elapsed_ms(void* start, void* end) {
  BIOFM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end)));
  float ms = 0.0f;
  BIOFM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

}  // namespace biofm::range_timer::detail
