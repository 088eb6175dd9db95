// AdamW (decoupled weight decay, as torch.optim.AdamW) and global gradient-norm tools.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

struct AdamWHyper {
  float lr = 4e-4f;
  float beta1 = 0.9f, beta2 = 0.98f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  int64_t step = 1;  // 1-based, for bias correction
};

// One AdamW update of param (F32) from grad (F32) with moments m, v (F32), all the same
// shape. p -= lr·wd·p; m = b1·m + (1-b1)·g; v = b2·v + (1-b2)·g²;
// p -= lr · (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h);

// Σ g² over the tensor, added into acc[1] (F32 tensor on the same device).
void sum_squares_accumulate(Tensor& acc, const Tensor& g);
// g *= factor.
void scale_inplace(Tensor& g, float factor);

namespace cpu {
void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h);
void sum_squares_accumulate(Tensor& acc, const Tensor& g);
void scale_inplace(Tensor& g, float factor);
}  // namespace cpu
namespace cuda {
void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h);
void sum_squares_accumulate(Tensor& acc, const Tensor& g);
void scale_inplace(Tensor& g, float factor);
}  // namespace cuda

inline void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                       const AdamWHyper& h) {
  BIOFM_DISPATCH(param.device(), adamw_step, param, grad, m, v, h);
}
inline void sum_squares_accumulate(Tensor& acc, const Tensor& g) {
  BIOFM_DISPATCH(g.device(), sum_squares_accumulate, acc, g);
}
inline void scale_inplace(Tensor& g, float factor) {
  BIOFM_DISPATCH(g.device(), scale_inplace, g, factor);
}

}  // namespace biofm::ops
