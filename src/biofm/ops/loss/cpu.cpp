// Softmax cross-entropy with ignore index, fused with its gradient, CPU.
#include <cmath>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/loss/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

void cross_entropy_forward_backward(Tensor& token_loss, Tensor& dlogits, const Tensor& logits,
                                    const Tensor& labels, float grad_scale) {
  const char* op = "cross_entropy_forward_backward";
  require_f32(logits, op, "logits");
  require_i32(labels, op, "labels");
  if (logits.dim() != 2) fail(op, ": logits must be [N, V], got ", logits.describe());
  const int64_t N = logits.size(0), V = logits.size(1);
  if (labels.shape() != Shape{N})
    fail(op, ": labels must have shape ", shape_str({N}), ", got ", labels.describe());
  if (token_loss.defined()) require_f32_shape(token_loss, {N}, op, "token_loss");
  if (dlogits.defined()) require_f32_shape(dlogits, {N, V}, op, "dlogits");
  const int32_t* lab = labels.i32();
  // Validate every label before anything is written.
  for (int64_t n = 0; n < N; ++n)
    if (lab[n] != kIgnoreIndex && (lab[n] < 0 || lab[n] >= V))
      fail(op, ": label ", lab[n], " at row ", n, " is outside [0, ", V, ") and is not ",
           kIgnoreIndex);
  if (V == 0 && N > 0) {
    bool any = false;
    for (int64_t n = 0; n < N; ++n) any |= lab[n] != kIgnoreIndex;
    if (any) fail(op, ": logits have no classes");
  }
  const float* lp = logits.f32();
  float* tl = token_loss.defined() ? token_loss.f32() : nullptr;
  float* dp = dlogits.defined() ? dlogits.f32() : nullptr;  // may alias lp
#pragma omp parallel for schedule(static) num_threads(threads_for(N * V))
  for (int64_t n = 0; n < N; ++n) {
    const float* row = lp + n * V;
    const int32_t y = lab[n];
    if (y == kIgnoreIndex) {
      if (tl) tl[n] = 0.0f;
      if (dp)
        for (int64_t j = 0; j < V; ++j) dp[n * V + j] = 0.0f;
      continue;
    }
    float mx = row[0];
    for (int64_t j = 1; j < V; ++j) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(double(row[j]) - double(mx));
    const double lse = double(mx) + std::log(sum);
    const double loss = lse - double(row[y]);
    if (tl) tl[n] = float(loss);
    if (dp) {
      float* drow = dp + n * V;
      for (int64_t j = 0; j < V; ++j) {
        const double p = std::exp(double(row[j]) - lse);
        drow[j] = float((p - (j == y ? 1.0 : 0.0)) * double(grad_scale));
      }
    }
  }
}

void count_labels_accumulate(Tensor& count, const Tensor& labels) {
  const char* op = "count_labels_accumulate";
  require_i32(labels, op, "labels");
  require_f32_shape(count, {1}, op, "count");
  int64_t n = 0;
  for (int64_t i = 0; i < labels.numel(); ++i) n += labels.i32()[i] != kIgnoreIndex;
  count.f32()[0] += float(n);
}

}  // namespace biofm::ops::cpu
