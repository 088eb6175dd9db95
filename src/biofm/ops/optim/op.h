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

BIOFM_BACKENDS(adamw_step, sum_squares_accumulate, scale_inplace)

// ---- Whole-buffer optimizer ops (one launch each on CUDA, no host synchronisation) ----

// norm[1] = sqrt(Σ grad²) over the flat gradient buffer; clip_coef[1] = min(1, max_norm /
// (norm + 1e-6)) as torch.nn.utils.clip_grad_norm_, or 1 when max_norm <= 0; NaN when the
// norm is not finite (adamw_flat then skips the step). Both F32 on the gradient's device;
// the host reads norm only when it logs.
// grad_divisor (F32 [1] on the same device), when defined: grad holds d times the gradient
// (a loss summed over tokens, d = their count, known only on the device); norm is then that of
// grad / d and clip_coef includes the 1/d, so adamw_flat applies grad · clip_coef as usual.
// d < 1 counts as 1.
void grad_norm_clip_coef(Tensor& norm, Tensor& clip_coef, const Tensor& grad, float max_norm,
                         const Tensor& grad_divisor = Tensor());

// AdamW over the flat buffers (a no-op when clip_coef[0] is not finite):
// g = grad · clip_coef[0]; weight decay h.weight_decay applies
// to elements inside decay_ranges (I64 [R,2], sorted [start, end) element ranges, on the
// param's device), none elsewhere. m, v, grad: F32 flat. param: F32 flat; if compute_copy
// is defined (BF16, same numel) it receives the updated params rounded to bf16 in the same
// pass. param may instead be BF16 (pure bf16 parameters, no fp32 master; compute_copy must
// then be undefined): each element is widened to fp32, updated by exactly the F32 path's
// arithmetic and written back rounded to nearest even, so the result equals the F32 path
// run on the widened values followed by rounding to bf16.
void adamw_flat(Tensor& param, Tensor& compute_copy, const Tensor& grad, Tensor& m, Tensor& v,
                const Tensor& decay_ranges, const Tensor& clip_coef, const AdamWHyper& h);

BIOFM_BACKENDS(grad_norm_clip_coef, adamw_flat)

}  // namespace biofm::ops
