// AdamW (bit-identical to torch.optim.AdamW on CPU) and gradient-norm helpers, CPU.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/optim/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

// The double a user meant when writing this float (0.9f → 0.9): hyper-parameters reach
// torch as Python floats, so scalar math on them happens in double from the decimal value.
double decimal_double(float f) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *res.ptr = '\0';
  return std::strtod(buf, nullptr);
}

}  // namespace

namespace {

// torch: param.mul_(1 - lr·wd); exp_avg.lerp_(grad, 1 - b1);
// exp_avg_sq.mul_(b2).addcmul_(grad, grad, value = 1 - b2);
// denom = exp_avg_sq.sqrt() / sqrt(1 - b2^t) + eps; param.addcdiv_(exp_avg, denom, -lr / (1 - b1^t)).
// Scalars are formed in double (Python) and rounded to float once, as torch does.
AdamWScalars adamw_scalars(const AdamWHyper& h, float weight_decay) {
  const double lr = decimal_double(h.lr), b1 = decimal_double(h.beta1),
               b2 = decimal_double(h.beta2), wd = decimal_double(weight_decay);
  AdamWScalars s;
  s.decay = float(1.0 - lr * wd);
  s.w1 = float(1.0 - b1);
  s.beta2 = float(b2);
  s.w2 = float(1.0 - b2);
  s.step_size = float(-(lr / (1.0 - std::pow(b1, double(h.step)))));
  s.bc2_sqrt = float(std::sqrt(1.0 - std::pow(b2, double(h.step))));
  s.eps = float(decimal_double(h.eps));
  return s;
}

struct Chunk {
  int64_t start, len;
  bool decay;
};

constexpr int64_t kBlock = 8192;  // elements per chunk

// [0, n) cut into chunks of at most kBlock elements, each inside or outside every decay range.
std::vector<Chunk> chunks_for(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<Chunk> out;
  auto add = [&](int64_t a, int64_t b, bool decay) {
    for (int64_t s = a; s < b; s += kBlock) out.push_back({s, std::min(b, s + kBlock) - s, decay});
  };
  int64_t pos = 0;
  for (const auto& [a, b] : ranges) {
    add(pos, a, false);
    add(a, b, true);
    pos = b;
  }
  add(pos, n, false);
  return out;
}

// Exactly one of p (F32 parameters) and pb (BF16 parameters) is non-null. BF16 parameters
// are widened chunk by chunk into an fp32 buffer and updated by the very same adamw_rows as
// the F32 path, whose bf16 `copy` output writes them back rounded to nearest even: the bf16
// result is by construction the F32 path's result rounded.
void run_adamw(float* p, bf16* pb, const float* g, float* m, float* v, bf16* copy, int64_t n,
               const std::vector<Chunk>& chunks, const AdamWScalars& with_wd,
               const AdamWScalars& no_wd) {
#pragma omp parallel for schedule(static) num_threads(threads_for(n))
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& ch = chunks[c];
    const int64_t a = ch.start;
    const AdamWScalars& s = ch.decay ? with_wd : no_wd;
    if (pb) {
      float buf[kBlock];
      for (int64_t i = 0; i < ch.len; ++i) buf[i] = bf16_to_f32(pb[a + i]);
      adamw_rows(buf, g + a, m + a, v + a, ch.len, s, pb + a);
    } else {
      adamw_rows(p + a, g + a, m + a, v + a, ch.len, s, copy ? copy + a : nullptr);
    }
  }
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& h) {
  const char* op = "adamw_step";
  require_f32(param, op, "param");
  require_f32_shape(grad, param.shape(), op, "grad");
  require_f32_shape(m, param.shape(), op, "m");
  require_f32_shape(v, param.shape(), op, "v");
  if (h.step < 1) fail(op, ": step must be >= 1 (1-based), got ", h.step);
  const AdamWScalars s = adamw_scalars(h, h.weight_decay);
  const int64_t n = param.numel();
  run_adamw(param.f32(), nullptr, grad.f32(), m.f32(), v.f32(), nullptr, n, chunks_for(n, {{0, n}}), s, s);
}

void grad_norm_clip_coef(Tensor& norm, Tensor& clip_coef, const Tensor& grad, float max_norm,
                         const Tensor& grad_divisor) {
  const char* op = "grad_norm_clip_coef";
  require_f32(grad, op, "grad");
  require_f32(norm, op, "norm");
  require_f32(clip_coef, op, "clip_coef");
  if (norm.numel() != 1) fail(op, ": norm must hold one element, got ", norm.describe());
  if (clip_coef.numel() != 1) fail(op, ": clip_coef must hold one element, got ", clip_coef.describe());
  const float* g = grad.f32();
  const int64_t n = grad.numel();
  double s = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : s) num_threads(threads_for(n))
  for (int64_t i = 0; i < n; ++i) s += double(g[i]) * double(g[i]);
  float divisor = 1.0f;
  if (grad_divisor.defined()) {
    require_f32(grad_divisor, op, "grad_divisor");
    divisor = std::max(1.0f, grad_divisor.f32()[0]);
  }
  const float total = float(std::sqrt(s) / double(divisor));  // (divided before narrowing)
  norm.f32()[0] = total;
  // torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total + 1e-6), clamped to 1 (fp32).
  float coef = 1.0f;
  if (max_norm > 0.0f) coef = std::min(1.0f, max_norm / (total + 1e-6f));
  if (!std::isfinite(total)) coef = NAN;  // tells adamw_flat to skip this step
  clip_coef.f32()[0] = coef / divisor;
}

void adamw_flat(Tensor& param, Tensor& compute_copy, const Tensor& grad, Tensor& m, Tensor& v,
                const Tensor& decay_ranges, const Tensor& clip_coef, const AdamWHyper& h) {
  const char* op = "adamw_flat";
  const bool bf16_params = param.defined() && param.dtype() == DType::BF16;
  require(param, bf16_params ? DType::BF16 : DType::F32, op, "param");  // F32 or BF16
  const int64_t n = param.numel();
  const Shape flat{n};
  if (param.dim() != 1) fail(op, ": param must be a flat [n] buffer, got ", param.describe());
  require_f32_shape(grad, flat, op, "grad");
  require_f32_shape(m, flat, op, "m");
  require_f32_shape(v, flat, op, "v");
  if (bf16_params && compute_copy.defined())
    fail(op, ": BF16 parameters take no compute copy (got ", compute_copy.describe(), ")");
  if (compute_copy.defined()) {
    require(compute_copy, DType::BF16, op, "compute_copy");
    if (compute_copy.numel() != n)
      fail(op, ": compute_copy ", compute_copy.describe(), " must hold ", n, " elements");
  }
  require_f32(clip_coef, op, "clip_coef");
  if (clip_coef.numel() != 1) fail(op, ": clip_coef must hold one element, got ", clip_coef.describe());
  if (h.step < 1) fail(op, ": step must be >= 1 (1-based), got ", h.step);
  if (!std::isfinite(clip_coef.f32()[0])) return;  // non-finite gradients: skip the update
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (decay_ranges.defined()) {
    require(decay_ranges, DType::I64, op, "decay_ranges");
    if (decay_ranges.dim() != 2 || decay_ranges.size(1) != 2)
      fail(op, ": decay_ranges must be [R, 2], got ", decay_ranges.describe());
    const int64_t* r = decay_ranges.i64();
    int64_t prev = 0;
    for (int64_t i = 0; i < decay_ranges.size(0); ++i) {
      const int64_t a = r[2 * i], b = r[2 * i + 1];
      if (a < prev || b < a || b > n)
        fail(op, ": decay range ", i, " [", a, ", ", b, ") is unsorted, overlapping or past ", n);
      ranges.emplace_back(a, b);
      prev = b;
    }
  }
  AdamWScalars with_wd = adamw_scalars(h, h.weight_decay), no_wd = adamw_scalars(h, 0.0f);
  with_wd.grad_scale = no_wd.grad_scale = clip_coef.f32()[0];
  run_adamw(bf16_params ? nullptr : param.f32(), bf16_params ? param.bf() : nullptr, grad.f32(), m.f32(),
            v.f32(), compute_copy.defined() ? compute_copy.bf() : nullptr, n, chunks_for(n, ranges),
            with_wd, no_wd);
}

void sum_squares_accumulate(Tensor& acc, const Tensor& g) {
  const char* op = "sum_squares_accumulate";
  require_f32(g, op, "g");
  require_f32(acc, op, "acc");
  if (acc.numel() != 1) fail(op, ": acc must hold one element, got ", acc.describe());
  const float* gp = g.f32();
  const int64_t n = g.numel();
  double s = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : s) num_threads(threads_for(n))
  for (int64_t i = 0; i < n; ++i) s += double(gp[i]) * double(gp[i]);
  acc.f32()[0] += float(s);
}

void scale_inplace(Tensor& g, float factor) {
  require_f32(g, "scale_inplace", "g");
  float* gp = g.f32();
  const int64_t n = g.numel();
#pragma omp parallel for simd schedule(static) num_threads(threads_for(n))
  for (int64_t i = 0; i < n; ++i) gp[i] *= factor;
}

}  // namespace biofm::ops::cpu
