// Small elementwise helpers the models need between the big ops.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

// y += x (same shape, F32).
void add_inplace(Tensor& y, const Tensor& x);

namespace cpu {
void add_inplace(Tensor& y, const Tensor& x);
}
namespace cuda {
void add_inplace(Tensor& y, const Tensor& x);
}

inline void add_inplace(Tensor& y, const Tensor& x) { BIOFM_DISPATCH(y.device(), add_inplace, y, x); }

}  // namespace biofm::ops
