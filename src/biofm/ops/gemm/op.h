// Linear layers: y = x·Wᵀ + b with W stored [out, in] (the Hugging Face layout).
// Conventions for every op family: activation gradients are overwritten; parameter
// gradients are accumulated (+=), so micro-batch accumulation and tied weights need no
// extra pass. An undefined Tensor means "not wanted" (skip that output).
#pragma once
#include "biofm/ops/dispatch.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

// out[N,O] = x[N,I] · w[O,I]ᵀ (+ bias[O] if defined) (+ residual[N,O] if defined: a block's
// residual add folded into the GEMM). x, out (and dx, dout) may carry extra leading
// dimensions: they are read as matrices of numel/last-dim rows. residual must not alias out.
void linear_forward(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                    const Tensor& residual = Tensor());
// dx[N,I] = dout·w (overwritten, if defined); dw[O,I] += doutᵀ·x; dbias[O] += Σ_n dout.
void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w);

// While a WeightGradsBeside(true) lives on this thread, the CUDA linear backward ops (bf16, and
// so the emulated recipes that call it, and FP8 with per-tensor scales) queue their weight and
// bias gradients on the side stream, beside
// the input gradient (core/side_stream.h, whose rules the caller keeps: no writes to dout or x
// and no reads of dw or dbias before side_stream::join()). The model's backward sets it for the
// transformer layers (ops.wgrad_stream). No effect on the CPU.
class WeightGradsBeside {
 public:
  explicit WeightGradsBeside(bool on);
  ~WeightGradsBeside();
  WeightGradsBeside(const WeightGradsBeside&) = delete;
  WeightGradsBeside& operator=(const WeightGradsBeside&) = delete;

 private:
  bool previous_;
};
bool weight_grads_beside();

// FP8 linear layers (fp8_config in training configs): x and w are quantized to `fwd`, dout to
// `bwd`, each with its own per-tensor scale from its current amax (ops/fp8/op.h); the products
// accumulate in fp32 on Hopper's FP8 tensor cores; out and dx come out in x's dtype, dw and
// dbias (F32) accumulate as above; dbias sums the unquantized dout. HYBRID = E4M3 forward,
// E5M2 gradients. In and out features must be multiples of 16. The CPU version is the
// reference: the same quantization, then the fp32 GEMMs. x_amax / dout_amax (F32 [1],
// optional): max |x| / max |dout| already computed by their producer (skips that pass).
struct Fp8Recipe {
  Fp8Type fwd = Fp8Type::E4M3;
  Fp8Type bwd = Fp8Type::E5M2;
};
// The transposed FP8 codes of a layer's input x (and their scale_inv), written by the forward
// pass's quantization of x when asked for and read by backward for the weight gradient, so
// that backward does not quantize x again. CUDA only (the CPU reference quantizes again).
// replaces_x (set with ops.fp8_release_inputs on, where the weight gradient's FP8 GEMM has a
// cuBLASLt algorithm, checked when the codes were made; always when x came as its producer's
// codes, Fp8Codes, since there is no x): backward reads these codes and never x: the caller
// drops x after forward
// and pass an undefined x to linear_backward_fp8 (its shape then comes from dx and w; should
// cuBLASLt still refuse that GEMM, the weight gradient is computed in bf16 from the decoded
// codes). An FP8 layer then keeps one byte per input element for backward instead of three.
struct Fp8SavedInput {
  Tensor codes_t, scale_inv;  // xᵀ [I, N rounded up to 16]
  bool replaces_x = false;
};
// The codes of a weight, both forms, kept across calls while the weight does not change (the
// micro batches of one optimizer step): empty, linear_forward_fp8 fills it; filled, forward
// (w) and backward (wᵀ, for the input gradient) use it instead of quantizing w. The caller
// empties it when w changes. Without it, backward quantizes w again.
struct Fp8WeightCodes {
  Tensor codes, codes_t, scale_inv;  // w [O, I], wᵀ [I, O]
  Tensor scale_inv_t;                // block scaling: the scales of codes_t (per tensor: scale_inv serves both)
  // Inference (no backward): the forward makes codes only, not codes_t (which would hold
  // another byte per parameter that nothing reads).
  bool forward_only = false;
};
// A GEMM operand that its producer already quantized for this layer under DelayedScaling
// (ops::fp8_quantize_gelu, layernorm_forward_fp8, rmsnorm_forward_fp8), so that its bf16 values
// were never stored: row-major codes [N, C], the
// transposed codes [C, Np] (Np = N rounded up to 16) and their scale_inv. CUDA only.
//   linear_forward_fp8 x_codes: x itself (pass an undefined x); `save` then always replaces x.
//   linear_backward_fp8 dout_codes: dout (pass an undefined dout, and no dbias: the producer
//   summed dout's columns itself).
// Should cuBLASLt have no FP8 algorithm, the bf16 GEMM runs on the codes decoded.
struct Fp8Codes {
  Tensor codes, codes_t, scale_inv;
  // Uninitialised codes of both forms for an operand of [rows, cols], on the GPU.
  static Fp8Codes empty_for(int64_t rows, int64_t cols) {
    return {Tensor::empty({rows, cols}, DType::U8, Device::CUDA),
            Tensor::empty({cols, (rows + 15) / 16 * 16}, DType::U8, Device::CUDA),
            Tensor::empty({1}, DType::F32, Device::CUDA)};
  }
};
void linear_forward_fp8(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual,
                        const Fp8Recipe& recipe, Fp8SavedInput* save = nullptr, const Tensor& x_amax = Tensor(),
                        Fp8WeightCodes* w_codes = nullptr, const Fp8Codes* x_codes = nullptr);
// x undefined: only with saved->replaces_x and dx defined (see Fp8SavedInput).
void linear_backward_fp8(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                         const Tensor& w, const Fp8Recipe& recipe, const Fp8SavedInput* saved = nullptr,
                         const Tensor& dout_amax = Tensor(), const Fp8WeightCodes* w_codes = nullptr,
                         const Fp8Codes* dout_codes = nullptr);

// Float8BlockScaling linear layers (Transformer Engine's DeepSeek-style recipe): x and dout in
// 1×128 tiles along each GEMM's contraction dimension, w in 128×128 blocks, one fp32 scale per
// tile (a power of two unless f32_scales), ops/blockscale/op.h. On Hopper the three GEMMs run on
// cuBLASLt's block-scaled FP8 path (VEC128 scales; a weight block's scale is repeated for each of
// its rows, which is the same arithmetic as one scale per 128×128 block). Where cuBLASLt cannot
// (in or out features not multiples of 128, or no algorithm), the same numerics run emulated:
// quantize-dequantize, then the bf16/fp32 GEMMs. The CPU version is that emulation in fp32, the
// reference. dbias sums the unquantized dout. save / saved and w_codes as for linear_*_fp8.
struct Fp8BlockRecipe {
  Fp8Type fwd = Fp8Type::E4M3;
  Fp8Type bwd = Fp8Type::E5M2;
  bool f32_scales = false;
};
void linear_forward_fp8_block(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                              const Tensor& residual, const Fp8BlockRecipe& recipe, Fp8SavedInput* save = nullptr,
                              Fp8WeightCodes* w_codes = nullptr);
void linear_backward_fp8_block(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const Fp8BlockRecipe& recipe, const Fp8SavedInput* saved = nullptr,
                               const Fp8WeightCodes* w_codes = nullptr);

// The MLP of ESM-2 with its exact (erf) GELU folded into the GEMMs:
//   linear_gelu_forward:   pre = x·wᵀ + bias, act = gelu(pre)  (pre undefined: not stored)
//   linear_dgelu_backward: dpre = (dout·w) ⊙ gelu'(pre), with w the *second* linear's weight
//                          [O, F] (its input gradient and the GELU backward in one GEMM)
// On CUDA (bf16, feature dims multiples of 8, contraction (H) in [1024, 2048]:
// where it measured faster, ops.gemm_fused_gelu)
// one CUTLASS GEMM each, the GELU in its epilogue; elsewhere linear_forward/linear_backward and the GELU ops, which is
// also the CPU reference. bias must be defined.
void linear_gelu_forward(Tensor& act, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias);
void linear_dgelu_backward(Tensor& dpre, const Tensor& dout, const Tensor& w, const Tensor& pre);

BIOFM_BACKENDS(linear_forward, linear_backward, linear_forward_fp8, linear_backward_fp8, linear_forward_fp8_block,
               linear_backward_fp8_block)
BIOFM_BACKENDS(linear_gelu_forward, linear_dgelu_backward)
namespace unfused {  // the pair as separate ops on either device: the reference, and the fallback
decltype(::biofm::ops::linear_gelu_forward) linear_gelu_forward;
decltype(::biofm::ops::linear_dgelu_backward) linear_dgelu_backward;
}  // namespace unfused

namespace cuda {
// How many linear_gelu_forward / linear_dgelu_backward calls ran the fused CUTLASS kernels.
int64_t gemm_gelu_fused_calls();
// How many Float8BlockScaling GEMMs have run emulated on CUDA in this process (tests, reports).
int64_t fp8_block_emulated_calls();
// How many GEMM tuning buckets ops.gemm_autotune has timed candidates for in this process.
int64_t gemm_autotune_tunings();
}  // namespace cuda

// The emulated Float8BlockScaling linear layers on either device (what cpu:: runs, and cuda::
// where the native path cannot).
void linear_forward_fp8_block_emulated(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                                       const Tensor& residual, const Fp8BlockRecipe& recipe);
void linear_backward_fp8_block_emulated(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                                        const Tensor& w, const Fp8BlockRecipe& recipe);

}  // namespace biofm::ops
