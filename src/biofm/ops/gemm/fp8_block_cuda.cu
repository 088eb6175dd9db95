// Float8BlockScaling linear layers on Hopper through cuBLASLt's block-scaled FP8 GEMMs (op.h).
// As in fp8_cuda.cu, both operands are K-major (op(A) = T, op(B) = N); every operand carries a
// VEC128 scale tensor, one fp32 dequantisation scale per 128 of K per row, k-block-major:
//   forward  outᵀ (O x N) = op_T(w codes [O, I]) · (x codes [N, I]),          k = I;
//   dx       dxᵀ  (I x N) = op_T(wᵀ codes [I, O]) · (dout codes [N, O]),      k = O;
//   dw       dwᵀ  (I x O) += op_T(xᵀ codes [I, Np]) · (doutᵀ codes [O, Np]), k = Np,
// with Np the tokens rounded up to 128 (zero codes beyond N). x and dout are tiled 1×128 along
// K of their GEMM (fp8_block_quantize's row form, or its transposed column form for the
// weight gradient); the weight's 128×128 block scales are written per row into both of its
// forms. The GEMMs accumulate in fp32 without fast accumulation. cuBLASLt 13.1 takes these
// GEMMs only with M and N multiples of 4 (run_over_tokens splits the tokens) and with the scale
// pointers set when the algorithm is chosen (cuda.cu). Where the native path cannot run
// (shapes, alignment, no algorithm) the emulated layer runs instead (noted once).
#include <algorithm>
#include <atomic>
#include <cstdio>

#include "biofm/ops/blockscale/op.h"
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/gemm/cublaslt_plans_cuda.h"
#include "biofm/ops/gemm/op.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;
using namespace gemm_detail;

namespace {

std::atomic<int64_t> g_emulated_calls{0};

void note_emulated(const char* why) {
  g_emulated_calls.fetch_add(1, std::memory_order_relaxed);
  static std::atomic<bool> noted{false};
  if (!noted.exchange(true))
    std::fprintf(stderr, "biofm gemm: Float8BlockScaling runs emulated for some layers: %s (noted once)\n", why);
}

GemmKey block_key(GemmKey key, Fp8Type a, Fp8Type b) {
  key = fp8_key(key, a, b, /*fast_accum=*/false);
  key.block_scaled = 1;
  return key;
}

bool native_shape(int64_t O, int64_t I, const Tensor& x, const Tensor& w) {
  return O % 128 == 0 && I % 128 == 0 && aligned(x.raw(), 16) && aligned(w.raw(), 16);
}

int64_t tokens_padded(int64_t N) { return (N + 127) / 128 * 128; }

// w's codes in both forms from its 128×128 blocks: from the cache when it holds them.
void weight_codes(const Tensor& w, Fp8Type t, bool f32_scales, const Fp8WeightCodes* cache, Fp8BlockCodes& rows,
                  Fp8BlockCodes& cols) {
  const int64_t O = w.size(0), I = w.size(1);
  if (cache && cache->codes.defined() && cache->codes.shape() == Shape{O, I} && cache->scale_inv_t.defined()) {
    rows = {cache->codes, cache->scale_inv};
    cols = {cache->codes_t, cache->scale_inv_t};
    return;
  }
  cuda::fp8_block_quantize(&rows, &cols, w, t, !f32_scales, /*weight_2d=*/true);
}

// D [N, m] (row-major; column-major m x N, ldc = m) = op_T(A)·B (+ bias) + beta·C over the N
// token rows of B (b's row form, the key made for all N rows). cuBLASLt's block-scaled GEMMs
// take a multiple of 4 token rows, so with N % 4 = t != 0 this runs the last four rows into a
// scratch [4, m] (b.tail_scale_inv holds their scales), copies its last t rows into D, then runs
// the first N - t rows in place. The tail goes first, so that a shape without a tail algorithm
// falls back before any other work. False when cuBLASLt has no algorithm (D maybe partly written).
bool run_over_tokens(GemmKey key, const void* A, const float* a_scale, const Fp8BlockCodes& b, void* D, DType dt,
                     float beta, const void* C, const void* bias) {
  const int64_t N = key.n, m = key.m, k = key.k, t = N % 4, esz = int64_t(dtype_size(dt));
  if (t && N < 4) return false;
  if (t) {
    const Tensor tail = Tensor::empty({4, m}, dt, Device::CUDA);
    const uint8_t* b_tail = static_cast<const uint8_t*>(b.codes.raw()) + (N - 4) * k;
    const char* c_tail = C ? static_cast<const char*>(C) + (N - 4) * m * esz : nullptr;
    GemmKey tk = key;
    tk.n = 4;
    tk.align_b = alignment_of(b_tail);
    tk.align_c = std::min(alignment_of(tail.raw()), c_tail ? alignment_of(c_tail) : 256u);
    if (!run_plan(tk, A, b_tail, tail.raw(), 1.0f, beta, bias, /*optional=*/true, c_tail, a_scale,
                  b.tail_scale_inv.f32()))
      return false;
    BIOFM_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(D) + (N - t) * m * esz,
                                     static_cast<const char*>(tail.raw()) + (4 - t) * m * esz, size_t(t * m * esz),
                                     cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
  }
  if (N - t == 0) return true;
  key.n = N - t;
  return run_plan(key, A, b.codes.raw(), D, 1.0f, beta, bias, /*optional=*/true, C, a_scale, b.scale_inv.f32());
}

}  // namespace

int64_t fp8_block_emulated_calls() { return g_emulated_calls.load(std::memory_order_relaxed); }

void linear_forward_fp8_block(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias_in,
                              const Tensor& residual, const Fp8BlockRecipe& recipe, Fp8SavedInput* save,
                              Fp8WeightCodes* w_codes) {
  const auto [N, I, O] = check_linear_forward("linear_forward_fp8_block", out, x, w, bias_in, residual);
  if (save) *save = Fp8SavedInput{};
  if (N == 0 || !native_shape(O, I, x, w) || (N % 4 && N < 4)) {
    if (N > 0) note_emulated("in / out features not multiples of 128, fewer than 4 tokens, or unaligned tensors");
    return linear_forward_fp8_block_emulated(out, x, w, bias_in, residual, recipe);
  }
  const DType dt = x.dtype();
  Fp8BlockCodes xr, xc, wr, wc;  // x's two forms in one pass when backward keeps the transposed one
  cuda::fp8_block_quantize(&xr, save ? &xc : nullptr, x, recipe.fwd, !recipe.f32_scales, false);
  weight_codes(w, recipe.fwd, recipe.f32_scales, w_codes, wr, wc);
  if (w_codes && !w_codes->scale_inv_t.defined()) *w_codes = Fp8WeightCodes{wr.codes, wc.codes, wr.scale_inv, wc.scale_inv};
  const Tensor bias = aligned_in_dtype(bias_in, dt);
  GemmKey key = block_key(make_key(CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, I, I, O, dt, dt, wr.codes.raw(), xr.codes.raw(),
                                   out.raw()),
                          recipe.fwd, recipe.fwd);
  const bool residual_as_c = residual.defined() && alignment_of(residual.raw()) >= key.align_c;
  if (bias.defined()) key.epilogue = CUBLASLT_EPILOGUE_BIAS;
  if (run_over_tokens(key, wr.codes.raw(), wr.scale_inv.f32(), xr, out.raw(), dt, residual_as_c ? 1.0f : 0.0f,
                      residual_as_c ? residual.raw() : nullptr, bias.defined() ? bias.raw() : nullptr)) {
    if (residual.defined() && !residual_as_c) add_inplace(out, residual);
    if (save) *save = Fp8SavedInput{xc.codes, xc.scale_inv};
    return;
  }
  note_emulated(("no cuBLASLt algorithm for the forward " + describe(key)).c_str());
  linear_forward_fp8_block_emulated(out, x, w, bias_in, residual, recipe);
}

void linear_backward_fp8_block(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Fp8BlockRecipe& recipe, const Fp8SavedInput* saved,
                               const Fp8WeightCodes* w_codes) {
  const auto [N, I, O] = check_linear_backward("linear_backward_fp8_block", dx, dw, dbias, dout, x, w);
  if (N == 0 || !native_shape(O, I, x, w) || !aligned(dout.raw(), 16) || (N % 4 && N < 4)) {
    if (N > 0) note_emulated("in / out features not multiples of 128, fewer than 4 tokens, or unaligned tensors");
    return linear_backward_fp8_block_emulated(dx, dw, dbias, dout, x, w, recipe);
  }
  const DType dt = x.dtype();
  const int64_t Np = tokens_padded(N);
  Fp8BlockCodes dr, dc;  // dout 1×128 along O (input gradient), 128×1 along the tokens (weight gradient)
  cuda::fp8_block_quantize(dx.defined() ? &dr : nullptr, dw.defined() ? &dc : nullptr, dout, recipe.bwd,
                     !recipe.f32_scales, false);
  Tensor none;
  if (dx.defined()) {
    Fp8BlockCodes wr, wc;
    weight_codes(w, recipe.fwd, recipe.f32_scales, w_codes, wr, wc);
    const GemmKey key = block_key(make_key(CUBLAS_OP_T, CUBLAS_OP_N, I, N, O, O, O, I, dt, dt, wc.codes.raw(),
                                           dr.codes.raw(), dx.raw()),
                                  recipe.fwd, recipe.bwd);
    if (!run_over_tokens(key, wc.codes.raw(), wc.scale_inv.f32(), dr, dx.raw(), dt, 0.0f, nullptr, nullptr)) {
      note_emulated(("no cuBLASLt algorithm for the input gradient " + describe(key)).c_str());
      linear_backward_fp8_block_emulated(dx, none, none, dout, x, w, recipe);
    }
  }
  if (dw.defined()) {
    Fp8BlockCodes xc;
    if (saved && saved->codes_t.defined() && saved->codes_t.shape() == Shape{I, Np} &&
        saved->scale_inv.shape() == Shape{Np / 128, I})
      xc = {saved->codes_t, saved->scale_inv};  // the forward pass's codes of the same x
    else
      cuda::fp8_block_quantize(nullptr, &xc, x, recipe.fwd, !recipe.f32_scales, false);
    const GemmKey key = block_key(make_key(CUBLAS_OP_T, CUBLAS_OP_N, I, O, Np, Np, Np, I, dt, DType::F32,
                                           xc.codes.raw(), dc.codes.raw(), dw.raw()),
                                  recipe.fwd, recipe.bwd);
    if (!run_plan(key, xc.codes.raw(), dc.codes.raw(), dw.raw(), 1.0f, 1.0f, nullptr, /*optional=*/true, nullptr,
                  xc.scale_inv.f32(), dc.scale_inv.f32())) {
      note_emulated(("no cuBLASLt algorithm for the weight gradient " + describe(key)).c_str());
      linear_backward_fp8_block_emulated(none, dw, none, dout, x, w, recipe);
    }
  }
  if (dbias.defined()) column_sums_into(dbias, dout);
}

}  // namespace biofm::ops::cuda
