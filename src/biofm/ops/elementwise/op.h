// Small elementwise helpers the models need between the big ops.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

// y += x (same shape; F32 or BF16, both the same dtype; fp32 arithmetic).
void add_inplace(Tensor& y, const Tensor& x);
// dst = src converted (F32 <-> BF16, or same dtype copy); same numel, same device.
void cast(Tensor& dst, const Tensor& src);
// acc[1] (F32) += Σ x (x F32 or BF16), without a host read.
void sum_accumulate(Tensor& acc, const Tensor& x);

BIOFM_BACKENDS(add_inplace, cast, sum_accumulate)

}  // namespace biofm::ops
