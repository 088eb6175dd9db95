// CPU-only builds: no cuBLASLt, so nothing is ever tuned (tuning.h).
#include "biofm/ops/gemm/tuning.h"

namespace biofm::ops {

std::string gemm_tuning_table() { return {}; }

int64_t load_gemm_tuning_table(std::string_view, std::string* why) {
  if (why) *why = "this build has no CUDA backend";
  return -1;
}

void clear_gemm_tuning() {}

}  // namespace biofm::ops
