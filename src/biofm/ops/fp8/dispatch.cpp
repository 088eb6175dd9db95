// Backend choice of the fp8 family's newer ops (the older ones are in ops/dispatch.cpp).
#include "biofm/ops/fp8/delayed.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

void fp8_amax_record(Tensor& history_row, const Tensor& x, const Tensor& amax_in) {
  BIOFM_DISPATCH(history_row.device(), fp8_amax_record, history_row, x, amax_in);
}

void fp8_quantize_gelu(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& pre, const Tensor& dact, Fp8Type t,
                       const Tensor& amax, const Tensor& record, const Tensor& col_sums) {
  BIOFM_DISPATCH(pre.device(), fp8_quantize_gelu, q, q_t, scale_inv, pre, dact, t, amax, record, col_sums);
}

void fp8_delayed_update(Tensor& amax_history, Tensor& scale_amax, int margin, bool use_max) {
  BIOFM_DISPATCH(amax_history.device(), fp8_delayed_update, amax_history, scale_amax, margin, use_max);
}

}  // namespace biofm::ops
