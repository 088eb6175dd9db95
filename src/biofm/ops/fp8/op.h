// FP8 quantization with per-tensor current scaling (Transformer Engine's Float8CurrentScaling):
//   amax  = max |x| over the tensor,
//   scale = fp8_max / amax   (1 when amax is 0 or not finite),
//   q     = x·scale rounded to the nearest FP8 value (ties to even), saturated to ±fp8_max,
//   x ≈ q · scale_inv with scale_inv = 1 / scale (what a GEMM multiplies its product by).
// E4M3 (3 mantissa bits, max 448) carries activations and weights; E5M2 (2 mantissa bits, max
// 57344) gradients: Transformer Engine's HYBRID format. Codes are the OCP FP8 bytes (what
// cuBLASLt's CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 read); tensors of codes have dtype U8.
//
// fp8_quantize writes the codes of x[R, C] row-major into q [R, C] and/or transposed into
// q_t [C, Rp] (Rp >= R, a multiple of 16: the rows R..Rp of x read as zeros there), and
// scale_inv [1] (F32), all on x's device. The transposed copy is what Hopper's FP8 GEMMs need
// for the K-major operand of a weight gradient (they only take op(A) = T, op(B) = N).
// amax (F32 [1], optional): max |x| when the producer of x already computed it (e.g.
// swiglu_*_packed's amax output); the quantization then skips its own pass over x. (Producers
// reduce with fmaxf, which drops NaN: a NaN in x still gives NaN codes, which reach the loss and
// the trainer's non-finite check, but not a delayed-scaling amax history.)
// col_sums (F32 [C], optional): += the column sums of x as read (unquantized), in a fixed order
// (deterministic): the bias gradient of an output gradient, without another pass over it.
// record (F32, optional): a delayed-scaling history row (fp8/delayed.h): its slot 0 is
// max-folded with max |x| as fp8_amax_record(record, x) would (NaN wins); on CUDA in the
// quantization's own pass over x.
#pragma once
#include <cstdint>

#include "biofm/ops/dispatch.h"

namespace biofm::ops {

enum class Fp8Type : uint8_t { E4M3, E5M2 };
const char* fp8_type_name(Fp8Type t);

// Host-side definitions of the format, shared by the CPU reference and the tests.
float fp8_max(Fp8Type t);
// The half-way point past the format's max (464 for E4M3, 61440 for E5M2): a scaled value beyond
// it would round to a magnitude the format lacks and is saturated (an overflow); one up to it
// rounds to the max as any other value rounds (ties to even: 448).
float fp8_overflow_bound(Fp8Type t);
// Nearest FP8 value (ties to even), finite values saturating at ±max; ±inf and NaN give NaN (an
// overflow upstream is passed on, not clamped).
float fp8_round(float v, Fp8Type t);
uint8_t fp8_encode(float v, Fp8Type t);  // code of fp8_round(v, t)
float fp8_decode(uint8_t code, Fp8Type t);
float fp8_scale_for(float amax, Fp8Type t);  // fp8_max / amax, or 1

void fp8_quantize(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& x, Fp8Type t,
                  const Tensor& amax = Tensor(), const Tensor& col_sums = Tensor(), const Tensor& record = Tensor());

// fp8_quantize of the ESM-2 MLP's exact GELU, computed on the way, so that the bf16 tensor is
// never written: DelayedScaling's scale is known before the tensor exists, so the GELU's producer
// pass can write the next GEMM's codes itself.
//   dact undefined: src = gelu(pre)            (the second linear's input, forward)
//   dact defined:   src = dact ⊙ gelu'(pre)    (the first linear's output gradient, backward)
// src is first rounded to pre's dtype, as gelu_forward / gelu_backward would store it, then
// quantized exactly as fp8_quantize(src) with the scale of `amax` (required: delayed scaling's
// scale_amax). record (F32, required): the consumer's history row (fp8/delayed.h), whose slot 0
// is max-folded with max |src| (NaN dropped as the producers' amax drops it; not zeroed first),
// so that recording the amax takes no other launch; col_sums as fp8_quantize's, of src.
void fp8_quantize_gelu(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& pre, const Tensor& dact, Fp8Type t,
                       const Tensor& amax, const Tensor& record, const Tensor& col_sums = Tensor());

// The way back from fp8_quantize's transposed codes: x[r, c] = decode(q_t[c, r]) · scale_inv for
// the R rows of x (F32 or BF16; q_t [C, Rp], Rp >= R). What an FP8 layer that kept only its
// input's codes (Fp8SavedInput::replaces_x) computes its weight gradient from in bf16 when
// cuBLASLt refuses the FP8 GEMM.
void fp8_dequantize_transposed(Tensor& x, const Tensor& q_t, const Tensor& scale_inv, Fp8Type t);
// The row-major way back: x[r, c] = decode(q[r, c]) · scale_inv, q [R, C] (U8), x F32 or BF16
// (FP8 attention's outputs, which cuDNN writes as codes).
void fp8_dequantize(Tensor& x, const Tensor& q, const Tensor& scale_inv, Fp8Type t);

BIOFM_BACKENDS(fp8_quantize, fp8_dequantize_transposed, fp8_dequantize, fp8_quantize_gelu)

namespace cuda {
// How many fp8_quantize_gelu calls have run on the GPU in this process (tests).
int64_t fp8_quantize_gelu_calls();
}  // namespace cuda

namespace cpu {
// out = x quantized and dequantized (F32; x F32 or BF16): what an FP8 GEMM sees of x. amax
// (F32 [1], optional): the amax the scale derives from (delayed scaling's scale_amax);
// undefined: max |x|.
void fp8_fake_quantize(Tensor& out, const Tensor& x, Fp8Type t, const Tensor& amax = Tensor());
}  // namespace cpu

}  // namespace biofm::ops
