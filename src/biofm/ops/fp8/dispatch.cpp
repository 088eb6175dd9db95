// Backend choice of the fp8 family's newer ops (the older ones are in ops/dispatch.cpp).
#include "biofm/ops/fp8/delayed.h"

namespace biofm::ops {

void fp8_amax_record(Tensor& history_row, const Tensor& x, const Tensor& amax_in) {
  BIOFM_DISPATCH(history_row.device(), fp8_amax_record, history_row, x, amax_in);
}

void fp8_delayed_update(Tensor& amax_history, Tensor& scale_amax, int margin, bool use_max) {
  BIOFM_DISPATCH(amax_history.device(), fp8_delayed_update, amax_history, scale_amax, margin, use_max);
}

}  // namespace biofm::ops
