// Block-scaled low-precision numerics, CPU reference (the definitions Blackwell kernels and
// Hopper emulation are checked against): each block of a matrix gets its own scale.
//
//   Float8BlockScaling (Transformer Engine): E4M3/E5M2 values, one fp32 scale per 1×128 tile
//     (activations, gradients; along the GEMM's contraction dimension) or 128×128 block
//     (weights); scale = fp8_max / block amax, by default rounded down to a power of two.
//   MXFP8 (OCP Microscaling v1.0): E4M3/E5M2 values, one E8M0 scale (a power of two,
//     2^(code-127); code 0xFF is NaN) per 32 consecutive elements along the contraction
//     dimension. The scale is Transformer Engine's: X = 2^ceil(log2(amax / fp8_max)), so that no
//     element saturates (OCP's example rule, 2^(floor(log2 amax) - emax_elem), can saturate).
//   NVFP4: E2M1 values (±{0, 0.5, 1, 1.5, 2, 3, 4, 6}), one E4M3 scale per 16 elements (1×16,
//     or 16×16 for weights), and one fp32 scale per tensor:
//       S_enc   = 448·6 / amax(tensor)                      (1 when amax is 0 or not finite)
//       s_b     = e4m3(amax(block) / 6 · S_enc)              (the stored block scale)
//       q       = e2m1(x · S_enc / s_b)                      (0 when s_b is 0)
//       x̂       = q · s_b / S_enc
//     Gradients may round stochastically (to one of the two neighbouring E2M1 values, with
//     probabilities by distance); the weight-gradient GEMM's inputs may first be multiplied by
//     a 16×16 random Hadamard matrix along the contraction dimension (hadamard16_rows), which
//     leaves the product unchanged in exact arithmetic and spreads outliers.
//
// All functions here are CPU-only and work on F32 matrices [R, C] (leading dims folded).
#pragma once
#include <cstdint>

#include "biofm/ops/dispatch.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

// E2M1 (FP4): nearest value, ties to even, saturating at ±6; NaN stays NaN.
float e2m1_round(float v);
uint8_t e2m1_encode(float v);   // 4-bit code: sign bit 3, exponent bits 2..1, mantissa bit 0
float e2m1_decode(uint8_t code);
// The two E2M1 neighbours of v (lo <= v <= hi, equal when v is representable or saturates).
void e2m1_neighbours(float v, float& lo, float& hi);

// E8M0 (the MX scale): code = biased exponent (bias 127); 0xFF is NaN.
float e8m0_decode(uint8_t code);
// The E8M0 code of the smallest power of two >= v (v > 0; v == 0 gives code 0 = 2^-127,
// NaN gives 0xFF; clamped to [2^-127, 2^127]).
uint8_t e8m0_round_up(float v);

enum class BlockScaleKind : uint8_t {
  F32,      // Float8BlockScaling with use_f32_scales
  F32Pow2,  // Float8BlockScaling's default: the fp32 scale rounded down to a power of two
  E8M0,     // MXFP8
  Nvfp4,    // NVFP4: E4M3 block scales under an fp32 tensor scale
};

struct BlockQuant {
  BlockScaleKind kind = BlockScaleKind::F32Pow2;
  Fp8Type fp8 = Fp8Type::E4M3;  // element type for F32/F32Pow2/E8M0 (NVFP4 elements are E2M1)
  int block_rows = 1, block_cols = 128;  // a block covers [block_rows, block_cols] of [R, C]
  bool stochastic = false;               // NVFP4 only: stochastic rounding
  uint64_t seed = 0, stream = 0;         // stochastic rounding: Philox key and counter base
};

// out[R, C] = x quantized block by block and dequantized; x F32 or BF16; out F32 (the CPU's
// only choice) or, on CUDA, also x's dtype (BF16: the dequantized values rounded to bf16, exact
// for power-of-two scales, which feeds the bf16 GEMMs of Hopper's emulated path). Partial blocks
// at the edges are blocks of their own. The CUDA version gives the CPU's values bit for bit.
void block_fake_quantize(Tensor& out, const Tensor& x, const BlockQuant& q);
// Each group of 16 consecutive rows of x[R, C] (R a multiple of 16) multiplied by
// H16·diag(signs)/4 (H16 the Sylvester Hadamard matrix, signs ±1 from `seed`): an orthogonal
// transform, so (Hx)ᵀ(Hy) = xᵀy for two matrices transformed with the same seed. out has x's
// dtype (F32 on the CPU).
void hadamard16_rows(Tensor& out, const Tensor& x, uint64_t seed);

// Float8BlockScaling codes for Hopper's native block-scaled FP8 GEMMs (cuBLASLt's VEC128 scale
// mode: one fp32 dequantisation scale per 128 consecutive elements along the GEMM's contraction
// dimension, K, of each row of an operand, stored k-block-major: scale_inv[kb · rows + r]).
// From x [R, C] (F32 or BF16; C a multiple of 128), in one pass over x:
//   rows (if given): codes [R, C] with scale_inv [C/128, R]: 1×128 tiles along C, the operand of
//                    a GEMM that contracts over C;
//   cols (if given): codes [C, Rp], xᵀ, with scale_inv [Rp/128, C]: 128×1 tiles along R, the
//                    operand of a GEMM that contracts over R (Rp = R rounded up to 128; the rows
//                    R..Rp read as zeros, so the last tile's scale is that of its real rows).
// cuBLASLt's block-scaled GEMMs take a multiple of 4 rows only; when R is not one, the row
// form's scale_inv covers the first R4 = R - R % 4 rows ([C/128, R4]) and tail_scale_inv
// ([C/128, 4]) the last four (R >= 4), so that a GEMM can run as R4 rows plus 4 (see
// gemm/fp8_block_cuda.cu).
// weight_2d: 128×128 blocks instead (R a multiple of 128 too): one scale per block, written
// into both forms' per-row scales. Element codes = fp8_encode(x · enc), scale_inv = 1 / enc, enc
// as block_fake_quantize's F32 / F32Pow2 (pow2_scales), so decoding the codes gives that
// function's values.
struct Fp8BlockCodes {
  Tensor codes, scale_inv;  // U8, F32, on x's device
  Tensor tail_scale_inv;    // row form with R % 4 != 0: the last four rows' scales
};
void fp8_block_quantize(Fp8BlockCodes* rows, Fp8BlockCodes* cols, const Tensor& x, Fp8Type t, bool pow2_scales,
                        bool weight_2d);

BIOFM_BACKENDS(block_fake_quantize, hadamard16_rows, fp8_block_quantize)

// Float8BlockScaling's blocks for one GEMM operand [R, C]: 1×128 tiles along C (along_cols) or
// 128×1 along R, 128×128 for a weight; fp32 scales, powers of two unless f32_scales.
BlockQuant float8_block_quant(Fp8Type t, bool f32_scales, bool weight, bool along_cols);

// The ±1 signs hadamard16_rows applies before H16 (host; both backends use them).
void hadamard16_signs(uint64_t seed, float signs[16]);
// The uniform in [0, 1) stochastic rounding draws for element i (row-major index) of a call
// with BlockQuant seed/stream (host; the CUDA kernel computes the same Philox draw).
float stochastic_uniform(uint64_t seed, uint64_t stream, uint32_t i);

}  // namespace biofm::ops
