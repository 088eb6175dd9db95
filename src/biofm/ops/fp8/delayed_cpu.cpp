// FP8 delayed scaling, CPU reference (Transformer Engine's amax_and_scale_update, written
// from its definition).
#include <cmath>
#include <limits>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/fp8/delayed.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

// max with NaN propagated (an overflow upstream must reach the history)
float nan_max(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }

void check_state(const Tensor& h, const Tensor& s, const char* op) {
  require_f32(h, op, "amax_history");
  if (h.dim() != 2) fail(op, ": amax_history must be [N, L], got ", h.describe());
  require_f32_shape(s, {h.size(0)}, op, "scale_amax");
}

}  // namespace

void fp8_amax_record(Tensor& history_row, const Tensor& x, const Tensor& amax_in) {
  const char* op = "fp8_amax_record";
  require_f32(history_row, op, "history_row");
  if (history_row.numel() < 1) fail(op, ": history_row is empty");
  float a = 0.0f;
  if (amax_in.defined()) {
    require_f32_shape(amax_in, {1}, op, "amax_in");
    a = amax_in.f32()[0];
  } else if (x.dtype() == DType::F32) {
    for (int64_t i = 0; i < x.numel(); ++i) a = nan_max(a, std::fabs(x.f32()[i]));
  } else if (x.dtype() == DType::BF16) {
    for (int64_t i = 0; i < x.numel(); ++i) a = nan_max(a, std::fabs(bf16_to_f32(x.bf()[i])));
  } else {
    fail(op, ": x must be F32 or BF16, got ", x.describe());
  }
  float& slot = history_row.f32()[0];
  slot = nan_max(slot, a);
}

void fp8_delayed_update(Tensor& amax_history, Tensor& scale_amax, int margin, bool use_max) {
  const char* op = "fp8_delayed_update";
  check_state(amax_history, scale_amax, op);
  if (margin < 0) fail(op, ": margin must be >= 0, got ", margin);
  const int64_t N = amax_history.size(0), L = amax_history.size(1);
  for (int64_t n = 0; n < N; ++n) {
    float* h = amax_history.f32() + n * L;
    const float last = h[0];
    float amax = 0.0f;
    for (int64_t i = 0; i < L; ++i) amax = std::fmax(amax, h[i]);  // fmax: NaNs ignored, as TE's kernel
    if (!use_max) amax = last;
    for (int64_t i = 0; i + 1 < L; ++i) h[i] = h[i + 1];  // roll by one ...
    if (L > 1) h[L - 1] = last;
    h[0] = 0.0f;  // ... and open the next step's slot
    if (std::isfinite(amax) && amax > 0.0f)
      scale_amax.f32()[n] = std::min(std::ldexp(amax, margin), std::numeric_limits<float>::max());
  }
}

}  // namespace biofm::ops::cpu
