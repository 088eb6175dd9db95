#include "biofm/ops/fp8/stats.h"

#include <cmath>

#include "biofm/core/error.h"

namespace biofm::ops {

namespace {
std::vector<float> host_values(const Tensor& x) {
  const Tensor h = x.device() == Device::CPU ? x : x.to(Device::CPU);
  std::vector<float> v(size_t(h.numel()));
  if (h.dtype() == DType::F32)
    std::copy(h.f32(), h.f32() + h.numel(), v.begin());
  else if (h.dtype() == DType::BF16)
    for (int64_t i = 0; i < h.numel(); ++i) v[size_t(i)] = bf16_to_f32(h.bf()[i]);
  else
    fail("quantization stats: F32 or BF16 tensor expected, got ", h.describe());
  return v;
}
}  // namespace

void QuantTensorStats::merge(const QuantTensorStats& o) {
  amax = std::max(amax, o.amax);
  scale = o.scale;
  underflows += o.underflows;
  overflows += o.overflows;
  elements += o.elements;
}

QuantTensorStats fp8_tensor_stats(const Tensor& x, Fp8Type t, float scale_amax) {
  QuantTensorStats s;
  const std::vector<float> values = host_values(x);
  for (float v : values) s.amax = std::max(s.amax, std::fabs(v));
  const float scale = fp8_scale_for(scale_amax < 0 ? s.amax : scale_amax, t);
  s.scale = scale;
  // (not |y| > max: under current scaling amax·scale lands a rounding above the max, 448.00002)
  const float bound = fp8_overflow_bound(t);
  for (float v : values) {
    const float y = v * scale;
    if (std::fabs(y) > bound) ++s.overflows;
    else if (v != 0.0f && fp8_round(y, t) == 0.0f) ++s.underflows;
    ++s.elements;
  }
  return s;
}

QuantTensorStats block_tensor_stats(const Tensor& x, const Tensor& x_hat) {
  QuantTensorStats s;
  const std::vector<float> v = host_values(x), h = host_values(x_hat);
  if (v.size() != h.size()) fail("block_tensor_stats: x and x_hat differ in size");
  for (size_t i = 0; i < v.size(); ++i) {
    s.amax = std::max(s.amax, std::fabs(v[i]));
    if (v[i] != 0.0f && h[i] == 0.0f) ++s.underflows;
  }
  s.elements = int64_t(v.size());
  return s;
}

}  // namespace biofm::ops
