// FP8 linear layers on Hopper through cuBLASLt. Its FP8 GEMMs take only op(A) = T and
// op(B) = N, i.e. both operands K-major, so (with the row-major mapping of cuda.cu):
//   forward  outᵀ (O x N) = op_T(w codes [O, I]) · (x codes [N, I]),            k = I;
//   dx       dxᵀ  (I x N) = op_T(wᵀ codes [I, O]) · (dout codes [N, O]),        k = O;
//   dw       dwᵀ  (I x O) += op_T(xᵀ codes [I, Np]) · (doutᵀ codes [O, Np]),   k = Np,
// where Np is N rounded up to 16 (the padding columns are zeros). Every operand gets its own
// per-tensor scale; the GEMM multiplies by both scale_inv values (A/B scale pointers, on the
// device). An operand may come already quantized by its producer (Fp8Codes). The forward GEMM
// uses fast accumulation, the two gradient GEMMs do not (as Transformer Engine's defaults). Where cuBLASLt has no FP8 algorithm for a call, it runs the
// bf16 path instead (noted once on stderr).
#include <cuda_bf16.h>

#include <atomic>
#include <initializer_list>
#include <cstdio>

#include "biofm/core/side_stream.h"
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/fp8/op.h"
#include "biofm/ops/gemm/cublaslt_plans_cuda.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/options.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;
using namespace gemm_detail;

cudaDataType_t gemm_detail::fp8_cuda_type(Fp8Type t) { return t == Fp8Type::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

GemmKey gemm_detail::fp8_key(GemmKey key, Fp8Type a, Fp8Type b, bool fast_accum) {
  key.a_type = fp8_cuda_type(a);
  key.b_type = fp8_cuda_type(b);
  key.fast_accum = fast_accum;
  return key;
}

Tensor gemm_detail::aligned_in_dtype(const Tensor& t, DType dt) {
  if (!t.defined() || (t.dtype() == dt && aligned(t.raw(), 16))) return t;
  Tensor c = Tensor::empty(t.shape(), dt, Device::CUDA);
  cuda::cast(c, t);
  return c;
}

namespace {

struct Quantized {
  Tensor codes, scale_inv;
};

// Codes of x (row-major [R, C]) and/or of xᵀ ([C, Rp]) with their shared scale.
void quantize(const Tensor& x, int64_t R, int64_t C, bool row_major, int64_t Rp_transposed, Fp8Type t,
              Quantized* rm, Quantized* tr, const Tensor& amax = Tensor(), const Tensor& col_sums = Tensor()) {
  Tensor q, qt;
  if (row_major) q = Tensor::empty({R, C}, DType::U8, Device::CUDA);
  if (Rp_transposed > 0) qt = Tensor::empty({C, Rp_transposed}, DType::U8, Device::CUDA);
  Tensor s = Tensor::empty({1}, DType::F32, Device::CUDA);
  cuda::fp8_quantize(q, qt, s, x, t, amax, col_sums, Tensor());
  if (rm) *rm = {q, s};
  if (tr) *tr = {qt, s};
}

void note_fallback(const char* what, const GemmKey& key) {
  static std::atomic<bool> noted{false};
  if (!noted.exchange(true))
    std::fprintf(stderr, "biofm gemm: no cuBLASLt FP8 algorithm for the %s (%s); that call runs in bf16 (noted once)\n",
                 what, describe(key).c_str());
}

// Token rows rounded up to 16: the K extent of the weight-gradient GEMM.
int64_t padded_rows(int64_t N) { return (N + 15) / 16 * 16; }

bool fp8_shape_ok(int64_t O, int64_t I) { return O % 16 == 0 && I % 16 == 0; }

// The weight gradient dw[O, I] += doutᵀ·x as an FP8 GEMM over the Np padded token rows: xᵀ's
// codes (A, [I, Np]) against doutᵀ's (B, [O, Np]).
GemmKey weight_gradient_key(int64_t I, int64_t O, int64_t Np, DType dt, const Fp8Recipe& recipe, const void* xt,
                            const void* dqt, const void* dw) {
  return fp8_key(make_key(CUBLAS_OP_T, CUBLAS_OP_N, I, O, Np, Np, Np, I, dt, DType::F32, xt, dqt, dw), recipe.fwd,
                 recipe.bwd, /*fast_accum=*/false);
}

// Whether backward's weight-gradient GEMM will find an algorithm, asked in forward with the
// least alignment its operands can have then (16 bytes: the smallest cuBLASLt's FP8 kernels
// take), so that finding one here means finding one then.
bool weight_gradient_runs_fp8(int64_t I, int64_t O, int64_t Np, DType dt, const Fp8Recipe& recipe,
                              const void* xt) {
  GemmKey key = weight_gradient_key(I, O, Np, dt, recipe, xt, nullptr, nullptr);
  key.align_a = key.align_b = key.align_c = 16;
  return plan_exists(key);
}

// Checks an operand its producer quantized (Fp8Codes) as [N, C]; returns N.
int64_t check_codes(const char* op, const char* name, const Fp8Codes& c, int64_t C) {
  if (!c.codes.defined() || !c.codes_t.defined() || !c.scale_inv.defined())
    fail(op, ": ", name, " codes need both forms and their scale_inv");
  require_cuda(c.codes, op, name);
  require_cuda(c.codes_t, op, name);
  require_cuda(c.scale_inv, op, name);
  require_dtype(c.codes, DType::U8, op, name);
  require_dtype(c.codes_t, DType::U8, op, name);
  require_dtype(c.scale_inv, DType::F32, op, name);
  if (c.scale_inv.numel() != 1) fail(op, ": ", name, " codes' scale_inv must have one element");
  const int64_t N = c.codes.dim() == 2 ? c.codes.size(0) : -1;
  if (N < 0 || c.codes.size(1) != C || c.codes_t.shape() != Shape{C, padded_rows(N)})
    fail(op, ": ", name, " codes ", c.codes.describe(), " / ", c.codes_t.describe(), " do not match [N, ", C, "]");
  return N;
}

// The [N, C] values of transposed codes ([C, Np]), in dt: for the bf16 GEMM where cuBLASLt has
// no FP8 algorithm and only the codes of an operand exist.
Tensor decoded(const Tensor& codes_t, const Tensor& scale_inv, int64_t N, int64_t C, DType dt, Fp8Type t) {
  Tensor v = Tensor::empty({N, C}, dt, Device::CUDA);
  cuda::fp8_dequantize_transposed(v, codes_t, scale_inv, t);
  return v;
}

}  // namespace

void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias_in, const Tensor& residual,
                        const Fp8Recipe& recipe, Fp8SavedInput* save, const Tensor& x_amax,
                        Fp8WeightCodes* w_codes, const Fp8Codes* x_codes) {
  const char* op = "linear_forward_fp8";
  if (save) *save = Fp8SavedInput{};
  int64_t N, I, O;
  if (x_codes) {  // x exists only as its producer's codes: out [N, O] in the compute dtype
    if (x.defined()) fail(op, ": x and its producer's codes both given");
    check_weight(w, op);
    O = w.size(0), I = w.size(1);
    N = check_codes(op, "x", *x_codes, I);
    require_dtype(out, w.dtype(), op, "out");
    if (rows_of(out, O, op, "out") != N) fail(op, ": out ", out.describe(), " does not match the codes of x");
    if (bias_in.defined()) {
      require_float(bias_in, op, "bias");
      if (bias_in.shape() != Shape{O}) fail(op, ": bias must have shape [", O, "], got ", bias_in.describe());
    }
    if (residual.defined() && (residual.numel() != out.numel() || residual.dtype() != out.dtype()))
      fail(op, ": residual ", residual.describe(), " does not match out ", out.describe());
    if (!fp8_shape_ok(O, I) || N == 0 || !aligned(w.raw(), 16))
      fail(op, ": no FP8 GEMM for w ", w.describe(), ", whose input exists only as FP8 codes");
  } else {
    const LinearDims d = check_linear_forward(op, out, x, w, bias_in, residual);
    N = d.N, I = d.I, O = d.O;
    if (!fp8_shape_ok(O, I) || N == 0 || !aligned(x.raw(), 16) || !aligned(w.raw(), 16)) {
      linear_forward(out, x, w, bias_in, residual);
      return;
    }
  }
  const DType dt = out.dtype();
  Quantized xq, xt, wq, wt;  // one pass each for both forms when they are kept for backward
  if (x_codes) {
    xq = {x_codes->codes, x_codes->scale_inv};
    xt = {x_codes->codes_t, x_codes->scale_inv};
  } else {
    quantize(x, N, I, true, save ? padded_rows(N) : 0, recipe.fwd, &xq, &xt, x_amax);
  }
  if (w_codes && w_codes->codes.defined() && w_codes->codes.shape() == Shape{O, I}) {
    wq = {w_codes->codes, w_codes->scale_inv};  // unchanged since it was quantized
    wt = {w_codes->codes_t, w_codes->scale_inv};
  } else {
    quantize(w, O, I, true, w_codes && !w_codes->forward_only ? O : 0, recipe.fwd, &wq, &wt);
    if (w_codes) {
      w_codes->codes = wq.codes;
      w_codes->codes_t = wt.codes;  // (undefined when forward_only)
      w_codes->scale_inv = wq.scale_inv;
    }
  }
  const Tensor bias = aligned_in_dtype(bias_in, dt);
  GemmKey key = fp8_key(make_key(CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, I, I, O, dt, dt, wq.codes.raw(),
                                 xq.codes.raw(), out.raw()),
                        recipe.fwd, recipe.fwd, /*fast_accum=*/true);
  const bool residual_as_c = residual.defined() && alignment_of(residual.raw()) >= key.align_c;
  if (bias.defined()) key.epilogue = CUBLASLT_EPILOGUE_BIAS;
  if (run_plan(key, wq.codes.raw(), xq.codes.raw(), out.raw(), 1.0f, residual_as_c ? 1.0f : 0.0f,
               bias.defined() ? bias.raw() : nullptr, /*optional=*/true, residual_as_c ? residual.raw() : nullptr,
               wq.scale_inv.f32(), xq.scale_inv.f32())) {
    if (residual.defined() && !residual_as_c) add_inplace(out, residual);
    if (save)  // (codes from a producer: there is no x to keep, so they replace it)
      *save = Fp8SavedInput{xt.codes, xt.scale_inv,
                            x_codes || (op_options().fp8_release_inputs &&
                                        weight_gradient_runs_fp8(I, O, padded_rows(N), dt, recipe, xt.codes.raw()))};
    return;
  }
  note_fallback("forward", key);
  if (x_codes) {
    linear_forward(out, decoded(xt.codes, xt.scale_inv, N, I, dt, recipe.fwd), w, bias_in, residual);
    if (save) *save = Fp8SavedInput{xt.codes, xt.scale_inv, true};
  } else {
    linear_forward(out, x, w, bias_in, residual);
  }
}

void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x, const Tensor& w,
                         const Fp8Recipe& recipe, const Fp8SavedInput* saved, const Tensor& dout_amax,
                         const Fp8WeightCodes* w_codes, const Fp8Codes* dout_codes) {
  const char* op = "linear_backward_fp8";
  // Without x (dropped after forward: saved->replaces_x), dx stands in for its shape and dtype:
  // nothing below reads x's values when its saved codes serve the weight gradient.
  if (!x.defined() && !(saved && saved->replaces_x && dx.defined()))
    fail(op, ": x may be left out only when its saved FP8 codes replace it and dx is wanted");
  const Tensor& xs = x.defined() ? x : dx;
  int64_t N, I, O;
  if (dout_codes) {  // dout exists only as its producer's codes, which also summed its columns
    if (dout.defined() || dbias.defined())
      fail(op, ": with dout's producer codes, pass neither dout nor dbias (the producer sums dout's columns)");
    check_weight(w, op);
    O = w.size(0), I = w.size(1);
    N = check_codes(op, "dout", *dout_codes, O);
    require_float(xs, op, "x");
    if (dx.defined()) require_dtype(dx, xs.dtype(), op, "dx");
    if (dw.defined()) require_dtype(dw, DType::F32, op, "dw");
    if (rows_of(xs, I, op, "x") != N || (dx.defined() && rows_of(dx, I, op, "dx") != N) ||
        (dw.defined() && dw.shape() != w.shape()))
      fail(op, ": x ", xs.describe(), ", dx and dw do not match the codes of dout and w ", w.describe());
    if (!fp8_shape_ok(O, I) || N == 0 || !aligned(xs.raw(), 16) || !aligned(w.raw(), 16))
      fail(op, ": no FP8 GEMM for w ", w.describe(), ", whose output gradient exists only as FP8 codes");
  } else {
    const LinearDims d = check_linear_backward(op, dx, dw, dbias, dout, xs, w);
    N = d.N, I = d.I, O = d.O;
    if (!fp8_shape_ok(O, I) || N == 0 || !aligned(xs.raw(), 16) || !aligned(dout.raw(), 16) ||
        !aligned(w.raw(), 16)) {
      if (!x.defined()) fail(op, ": no FP8 path for this shape, and x was not kept");
      linear_backward(dx, dw, dbias, dout, x, w);
      return;
    }
  }
  const DType dt = xs.dtype();
  const int64_t Np = padded_rows(N);
  Quantized dq, dqt;
  if (dout_codes) {
    dq = {dout_codes->codes, dout_codes->scale_inv};
    dqt = {dout_codes->codes_t, dout_codes->scale_inv};
  } else {  // dbias from the same pass over dout (the quantization's column sums)
    quantize(dout, N, O, dx.defined(), dw.defined() ? Np : 0, recipe.bwd, &dq, &dqt, dout_amax, dbias);
  }
  // dout's values for a bf16 fallback GEMM (decoded when only its codes exist)
  auto dout_values = [&] { return dout_codes ? decoded(dqt.codes, dqt.scale_inv, N, O, dt, recipe.bwd) : dout; };
  Tensor none;
  // The weight gradient may go on the side stream, starting beside the input gradient.
  side_stream::Scope beside(weight_grads_beside() && dw.defined());
  if (dx.defined()) {
    Quantized wt;
    if (w_codes && w_codes->codes_t.defined() && w_codes->codes_t.shape() == Shape{I, O})
      wt = {w_codes->codes_t, w_codes->scale_inv};  // the forward pass's codes of the same w
    else
      quantize(w, O, I, false, O, recipe.fwd, nullptr, &wt);
    const GemmKey key = fp8_key(make_key(CUBLAS_OP_T, CUBLAS_OP_N, I, N, O, O, O, I, dt, dt, wt.codes.raw(),
                                         dq.codes.raw(), dx.raw()),
                                recipe.fwd, recipe.bwd, /*fast_accum=*/false);
    if (!run_plan(key, wt.codes.raw(), dq.codes.raw(), dx.raw(), 1.0f, 0.0f, nullptr, /*optional=*/true, nullptr,
                  wt.scale_inv.f32(), dq.scale_inv.f32())) {
      note_fallback("input gradient", key);
      linear_backward(dx, none, none, dout_values(), xs, w);  // (reads w and dout; xs only for its shape)
    }
  }
  if (dw.defined()) {
    beside.enter();
    for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &xs, &dout, &dw, &w, &dqt.codes, &dqt.scale_inv})
      beside.hold(*t);
    if (saved) beside.hold(saved->codes_t), beside.hold(saved->scale_inv);
    Quantized xt;
    if (saved && saved->codes_t.defined() && saved->codes_t.shape() == Shape{I, Np})
      xt = {saved->codes_t, saved->scale_inv};  // the forward pass's codes of the same x
    else if (x.defined())
      quantize(x, N, I, false, Np, recipe.fwd, nullptr, &xt);
    else
      fail(op, ": the saved codes of x do not match this gradient, and x was not kept");
    const GemmKey key = weight_gradient_key(I, O, Np, dt, recipe, xt.codes.raw(), dqt.codes.raw(), dw.raw());
    if (!run_plan(key, xt.codes.raw(), dqt.codes.raw(), dw.raw(), 1.0f, 1.0f, nullptr, /*optional=*/true, nullptr,
                  xt.scale_inv.f32(), dqt.scale_inv.f32())) {
      note_fallback("weight gradient", key);
      if (x.defined()) {
        linear_backward(none, dw, none, dout_values(), x, w);
      } else {  // x was released: its codes, decoded, are the x this gradient would have used
        linear_backward(none, dw, none, dout_values(), decoded(xt.codes, xt.scale_inv, N, I, dt, recipe.fwd), w);
      }
    }
  }
}

}  // namespace biofm::ops::cuda
