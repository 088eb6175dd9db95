// What a transformer layer's projections run in (the recipes' fp8_config / fp4_config and
// fp8_layers / fp4_layers): the compute precision, FP8 with one of Transformer Engine's scaling
// recipes, or NVFP4. One LayerQuant per layer; the model's Linear blocks read theirs.
//
//   Float8CurrentScaling  per-tensor scale from the tensor's own amax (ops/fp8/op.h)
//   DelayedScaling        per-tensor scale from an amax history of earlier steps (delayed.h)
//   Float8BlockScaling    fp32 scales per 1×128 tile (activations, gradients) / 128×128 block
//                         (weights) (ops/blockscale/op.h)
//   MXFP8BlockScaling     E8M0 scales per 32 elements (OCP MX), E4M3 values (ops/mx/op.h)
//   NVFP4BlockScaling     E2M1 values, E4M3 scales per 16 elements and an fp32 tensor scale;
//                         stochastic rounding of gradients; random Hadamard transform of the
//                         weight-gradient inputs (ops/fp4/op.h)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

enum class LayerFormat : uint8_t { Compute, Fp8, Fp4 };  // Compute: bf16 (fp32 on the CPU)
enum class Fp8Scaling : uint8_t { Current, Delayed, Block, Mxfp8 };

// Transformer Engine's DelayedScaling parameters (fp8_recipe_kwargs.*).
struct DelayedScalingOptions {
  int amax_history_len = 1024;
  bool amax_compute_max = true;  // amax_compute_algo: max (true) | most_recent
  int margin = 0;                // scale = fp8_max · 2^-margin / amax
  bool operator==(const DelayedScalingOptions&) const = default;
};

// Transformer Engine's NVFP4BlockScaling switches (fp4_config.fp4_recipe_kwargs.*).
struct Nvfp4Options {
  bool random_hadamard = true;      // not disable_rht: Hadamard-transform the wgrad GEMM inputs
  bool stochastic_rounding = true;  // not disable_stochastic_rounding: gradients round stochastically
  bool weight_2d = true;            // not disable_2d_quantization: weights get 16×16 blocks
  bool operator==(const Nvfp4Options&) const = default;
};

struct LayerQuant {
  LayerFormat format = LayerFormat::Compute;
  Fp8Scaling scaling = Fp8Scaling::Current;  // format Fp8
  Fp8Type fwd = Fp8Type::E4M3, bwd = Fp8Type::E5M2;  // HYBRID; E4M3 everywhere for fp8_format E4M3
  DelayedScalingOptions delayed;
  bool block_f32_scales = false;  // Float8BlockScaling's use_f32_scales (false: power-of-two scales)
  bool fp8_dpa = false;  // attention in FP8 as well (the recipes' fp8_recipe_kwargs.fp8_dpa; ops/attention/op.h)
  Nvfp4Options nvfp4;
  bool operator==(const LayerQuant&) const = default;
};

// "bf16", "fp8 Float8CurrentScaling", "fp4 NVFP4BlockScaling", ... (banner and errors).
std::string layer_quant_name(const LayerQuant& q);
const char* fp8_scaling_name(Fp8Scaling s);  // the Transformer Engine recipe class name

// Which layers (0-based) run in which format, from the recipes' 1-based lists (as their
// resolve_layer_precision does): a format enabled without a list takes every layer the other
// format's list does not claim; both enabled with neither list is an error, and so is a layer
// outside [1, layers], a fraction, or a layer in both lists; the list of a format that is not
// enabled is ignored. Empty lists mean "not given" (the recipes write null).
std::vector<LayerFormat> assign_layer_formats(int layers, bool fp8_enabled, const std::vector<double>& fp8_layers,
                                              bool fp4_enabled, const std::vector<double>& fp4_layers);

// One line per run of equal layers: "layers 1-2: fp8 DelayedScaling, layers 3-6: bf16".
std::string describe_layer_quant(const std::vector<LayerQuant>& layers, const char* compute_name);

}  // namespace biofm::ops
