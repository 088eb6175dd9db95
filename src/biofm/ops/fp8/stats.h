// FP8 statistics (the recipes' quantization stats logging): per quantized tensor, its amax, the
// scale it was quantized with, and the fractions of its elements that underflow (a nonzero
// value that quantizes to zero) and overflow (|x·scale| rounding past the format's max: saturated).
// Computed on the host from a copy of the tensor, only on the steps that log them.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "biofm/core/tensor.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

struct QuantTensorStats {
  float amax = 0.0f;      // max |x| (over the step's micro batches)
  float scale = 0.0f;     // the scale of the last quantization (0: block-scaled, no one scale)
  int64_t underflows = 0, overflows = 0, elements = 0;
  void merge(const QuantTensorStats& o);
};

// x's values (F32 or BF16, any device: copied to the host) quantized to `t` with the scale
// fp8_scale_for(scale_amax) (delayed scaling's), or, for scale_amax < 0, from x's own amax
// (current scaling).
QuantTensorStats fp8_tensor_stats(const Tensor& x, Fp8Type t, float scale_amax);
// Block-scaled: x and what the GEMM saw of it (F32, the same shape); no overflow by construction.
QuantTensorStats block_tensor_stats(const Tensor& x, const Tensor& x_hat);

// What a model collects during the steps that log statistics: "layer_03/qkv/input" -> stats.
struct QuantStatsCollector {
  std::map<std::string, QuantTensorStats> tensors;
  void add(const std::string& name, const QuantTensorStats& s) { tensors[name].merge(s); }
};

}  // namespace biofm::ops
