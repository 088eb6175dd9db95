// Linear layers on the CPU through OpenBLAS (row-major; W stored [out, in]).
#include <cblas.h>

#include <vector>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/op.h"

namespace biofm::ops {

namespace cpu_detail {
BlasSingleThread::BlasSingleThread() {
  saved = openblas_get_num_threads();
  if (saved != 1) openblas_set_num_threads(1);
}
BlasSingleThread::~BlasSingleThread() {
  if (saved != 1) openblas_set_num_threads(saved);
}
}  // namespace cpu_detail

namespace cpu {
using namespace cpu_detail;

// x is read as [N, I] (leading dimensions flattened), out as [N, O].
void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual) {
  const char* op = "linear_forward";
  require_f32(x, op, "x");
  require_f32(w, op, "w");
  require_f32(out, op, "out");
  if (w.dim() != 2) fail(op, ": w must be [out, in], got ", w.describe());
  const int64_t O = w.size(0), I = w.size(1);
  const int64_t N = rows_of(x, I, op, "x");
  if (rows_of(out, O, op, "out") != N)
    fail(op, ": out ", out.describe(), " does not match x ", x.describe(), " and w ", w.describe());
  if (bias.defined()) require_f32_shape(bias, {O}, op, "bias");
  if (residual.defined()) {
    require_f32(residual, op, "residual");
    if (residual.numel() != out.numel())
      fail(op, ": residual ", residual.describe(), " does not match out ", out.describe());
  }
  if (N == 0 || O == 0) return;
  float* y = out.f32();
  float beta = 0.0f;
  if (bias.defined() || residual.defined()) {
    // out starts as bias + residual; the GEMM accumulates onto it.
    const float* b = bias.defined() ? bias.f32() : nullptr;
    const float* r = residual.defined() ? residual.f32() : nullptr;
#pragma omp parallel for schedule(static) num_threads(threads_for(N * O))
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) y[n * O + o] = (b ? b[o] : 0.0f) + (r ? r[n * O + o] : 0.0f);
    beta = 1.0f;
  } else if (I == 0) {
    out.zero_();
  }
  if (I == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(N), int(O), int(I), 1.0f, x.f32(),
              int(I), w.f32(), int(I), beta, y, int(O));
}

void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w) {
  const char* op = "linear_backward";
  require_f32(dout, op, "dout");
  require_f32(x, op, "x");
  require_f32(w, op, "w");
  if (w.dim() != 2) fail(op, ": w must be [out, in], got ", w.describe());
  const int64_t O = w.size(0), I = w.size(1);
  const int64_t N = rows_of(x, I, op, "x");
  if (rows_of(dout, O, op, "dout") != N)
    fail(op, ": dout ", dout.describe(), " does not match x ", x.describe(), " and w ",
         w.describe());
  if (dx.defined()) {
    require_f32(dx, op, "dx");
    if (rows_of(dx, I, op, "dx") != N) fail(op, ": dx ", dx.describe(), " does not match x ", x.describe());
  }
  if (dw.defined()) require_f32_shape(dw, {O, I}, op, "dw");
  if (dbias.defined()) require_f32_shape(dbias, {O}, op, "dbias");

  if (dx.defined() && N > 0 && I > 0) {
    if (O == 0)
      dx.zero_();
    else  // dx[N,I] = dout[N,O] · w[O,I]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(N), int(I), int(O), 1.0f,
                  dout.f32(), int(O), w.f32(), int(I), 0.0f, dx.f32(), int(I));
  }
  if (N == 0) return;
  if (dw.defined() && O > 0 && I > 0)  // dw[O,I] += dout[N,O]ᵀ · x[N,I]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(O), int(I), int(N), 1.0f, dout.f32(),
                int(O), x.f32(), int(I), 1.0f, dw.f32(), int(I));
  if (dbias.defined() && O > 0) {
    // Column sums of dout in double: per-thread partials, then a fixed-order reduction.
    const float* g = dout.f32();
    const int nt = threads_for(N * O);
    ThreadPartials part(nt, O);
#pragma omp parallel num_threads(nt)
    {
      double* acc = part.row(thread_id());
#pragma omp for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const float* row = g + n * O;
        for (int64_t o = 0; o < O; ++o) acc[o] += row[o];
      }
    }
    part.add_to(dbias.f32());
  }
}

// FP8 reference: quantize and dequantize each operand exactly as the GPU does, then the fp32
// GEMMs above. A tensor of fp32 values on the FP8 grid of its own scale.
namespace {
Tensor fake_quantized(const Tensor& t, Fp8Type type) {
  Tensor q = Tensor::empty(t.shape(), DType::F32);
  fp8_fake_quantize(q, t, type);
  return q;
}
}  // namespace

void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual,
                        const Fp8Recipe& recipe, Fp8SavedInput* /*save: the CPU quantizes again*/,
                        const Tensor& /*x_amax: the same value as the CPU computes*/, Fp8WeightCodes* /*w_codes*/,
                        const Fp8Codes* x_codes) {
  if (x_codes) fail("linear_forward_fp8: inputs quantized by their producer are a CUDA path");
  linear_forward(out, fake_quantized(x, recipe.fwd), fake_quantized(w, recipe.fwd), bias, residual);
}

void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& w, const Fp8Recipe& recipe, const Fp8SavedInput* /*saved*/,
                         const Tensor& /*dout_amax*/, const Fp8WeightCodes* /*w_codes*/, const Fp8Codes* dout_codes) {
  if (dout_codes) fail("linear_backward_fp8: gradients quantized by their producer are a CUDA path");
  Tensor none;
  if (dx.defined() || dw.defined())
    linear_backward(dx, dw, none, fake_quantized(dout, recipe.bwd), fake_quantized(x, recipe.fwd),
                    fake_quantized(w, recipe.fwd));
  if (dbias.defined()) linear_backward(none, none, dbias, dout, x, w);  // from the unquantized gradient
}

void linear_forward_fp8_block(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                              const Tensor& residual, const Fp8BlockRecipe& recipe, Fp8SavedInput* /*save*/,
                              Fp8WeightCodes* /*w_codes*/) {
  linear_forward_fp8_block_emulated(out, x, w, bias, residual, recipe);
}

void linear_backward_fp8_block(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Fp8BlockRecipe& recipe, const Fp8SavedInput* /*saved*/,
                               const Fp8WeightCodes* /*w_codes*/) {
  linear_backward_fp8_block_emulated(dx, dw, dbias, dout, x, w, recipe);
}

}  // namespace cpu
}  // namespace biofm::ops
