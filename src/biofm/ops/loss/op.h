// Softmax cross-entropy with ignore index -100, fused with its gradient.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

constexpr int32_t kIgnoreIndex = -100;

// logits[N,V] (F32), labels[N] (I32). token_loss[N] (F32) = -log softmax(logits)[label], or 0
// where label == -100. If dlogits is defined it receives (softmax - onehot) * grad_scale
// (0 on ignored rows); dlogits may alias logits. Labels outside [0,V) other than -100 throw
// (before anything is written). An undefined token_loss is not written.
void cross_entropy_forward_backward(Tensor& token_loss, Tensor& dlogits, const Tensor& logits,
                                    const Tensor& labels, float grad_scale);

// count[1] (F32) += the number of labels != -100: a step's label-token count, kept on the
// device (the divisor of the step's gradients, see grad_norm_clip_coef). Exact while the
// running count stays below 2^24 (16.7M label tokens per step); beyond, rounded (rel. 6e-8).
void count_labels_accumulate(Tensor& count, const Tensor& labels);

BIOFM_BACKENDS(cross_entropy_forward_backward, count_labels_accumulate)

}  // namespace biofm::ops
