// GELU (erf and tanh forms) and SwiGLU, CPU (vectorised kernels in ../cpu_kernels.cpp).
#include <algorithm>

#include "biofm/ops/activation/op.h"
#include "biofm/ops/cpu_util.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

// Runs fn(begin, end) over [0, n) in blocks, in parallel when n is large.
template <class F>
void for_blocks(int64_t n, F fn) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(threads_for(n))
  for (int64_t b = 0; b < blocks; ++b) fn(b * kBlock, std::min(n, (b + 1) * kBlock));
}

void check_same(const Tensor& a, const Tensor& ref, const char* op, const char* name,
                const char* refname) {
  require_f32(a, op, name);
  if (a.shape() != ref.shape())
    fail(op, ": ", name, " ", a.describe(), " must match ", refname, " ", ref.describe());
}

}  // namespace

void gelu_forward(Tensor& out, const Tensor& x, GeluKind kind, const Tensor& out_amax) {
  const char* op = "gelu_forward";
  require_f32(x, op, "x");
  if (out_amax.defined()) require_f32_shape(out_amax, {1}, op, "out_amax");
  check_same(out, x, op, "out", "x");
  const float* xp = x.f32();
  float* yp = out.f32();
  const int64_t n = x.numel();
  const bool tanh_form = kind == GeluKind::Tanh;
  for_blocks(n, [&](int64_t a, int64_t b) { gelu_rows(yp + a, xp + a, b - a, tanh_form); });
  write_amax(out_amax, out, op);
}

void gelu_backward(Tensor& dx, const Tensor& dout, const Tensor& x, GeluKind kind, const Tensor& dx_amax) {
  const char* op = "gelu_backward";
  require_f32(x, op, "x");
  if (dx_amax.defined()) require_f32_shape(dx_amax, {1}, op, "dx_amax");
  check_same(dout, x, op, "dout", "x");
  check_same(dx, x, op, "dx", "x");
  const float* xp = x.f32();
  const float* gp = dout.f32();
  float* dp = dx.f32();
  const int64_t n = x.numel();
  const bool tanh_form = kind == GeluKind::Tanh;
  for_blocks(n, [&](int64_t a, int64_t b) {
    gelu_grad_rows(dp + a, gp + a, xp + a, b - a, tanh_form);
  });
  write_amax(dx_amax, dx, op);
}

void swiglu_forward(Tensor& out, const Tensor& gate, const Tensor& up) {
  const char* op = "swiglu_forward";
  require_f32(gate, op, "gate");
  check_same(up, gate, op, "up", "gate");
  check_same(out, gate, op, "out", "gate");
  const float* g = gate.f32();
  const float* u = up.f32();
  float* y = out.f32();
  const int64_t n = gate.numel();
  for_blocks(n, [&](int64_t a, int64_t b) { swiglu_rows(y + a, g + a, u + a, b - a); });
}

void swiglu_backward(Tensor& dgate, Tensor& dup, const Tensor& dout, const Tensor& gate,
                     const Tensor& up) {
  const char* op = "swiglu_backward";
  require_f32(gate, op, "gate");
  check_same(up, gate, op, "up", "gate");
  check_same(dout, gate, op, "dout", "gate");
  if (dgate.defined()) check_same(dgate, gate, op, "dgate", "gate");
  if (dup.defined()) check_same(dup, gate, op, "dup", "gate");
  const float* g = gate.f32();
  const float* u = up.f32();
  const float* d = dout.f32();
  float* dg = dgate.defined() ? dgate.f32() : nullptr;
  float* du = dup.defined() ? dup.f32() : nullptr;
  const int64_t n = gate.numel();
for_blocks(n, [&](int64_t a, int64_t b) {
    swiglu_grad_rows(dg ? dg + a : nullptr, du ? du + a : nullptr, d + a, g + a, u + a, b - a);
  });
}

namespace {
int64_t packed_width(const Tensor& out, const Tensor& gate_up, const char* op) {
  require_f32(gate_up, op, "gate_up");
  require_f32(out, op, "out");
  const int64_t F = out.dim() ? out.size(-1) : 0;
  if (F == 0 || rows_of(gate_up, 2 * F, op, "gate_up") * F != out.numel())
    fail(op, ": gate_up ", gate_up.describe(), " must be [N, 2F] for out/dout ", out.describe());
  return F;
}
}  // namespace

void swiglu_forward_packed(Tensor& out, const Tensor& gate_up, const Tensor& out_amax) {
  const int64_t F = packed_width(out, gate_up, "swiglu_forward_packed");
  const float* g = gate_up.f32();
  float* y = out.f32();
  const int64_t N = out.numel() / F;
#pragma omp parallel for schedule(static) num_threads(threads_for(out.numel()))
  for (int64_t n = 0; n < N; ++n) swiglu_rows(y + n * F, g + n * 2 * F, g + n * 2 * F + F, F);
  write_amax(out_amax, out, "swiglu_forward_packed");
}

void swiglu_backward_packed(Tensor& dgate_up, const Tensor& dout, const Tensor& gate_up,
                            const Tensor& dgate_up_amax) {
  const char* op = "swiglu_backward_packed";
  const int64_t F = packed_width(dout, gate_up, op);
  require_f32(dgate_up, op, "dgate_up");
  if (dgate_up.shape() != gate_up.shape())
    fail(op, ": dgate_up ", dgate_up.describe(), " must match gate_up ", gate_up.describe());
  const float* g = gate_up.f32();
  const float* d = dout.f32();
  float* dg = dgate_up.f32();
  const int64_t N = dout.numel() / F;
#pragma omp parallel for schedule(static) num_threads(threads_for(dout.numel()))
  for (int64_t n = 0; n < N; ++n)
    swiglu_grad_rows(dg + n * 2 * F, dg + n * 2 * F + F, d + n * F, g + n * 2 * F, g + n * 2 * F + F, F);
  write_amax(dgate_up_amax, dgate_up, op);
}

}  // namespace biofm::ops::cpu
