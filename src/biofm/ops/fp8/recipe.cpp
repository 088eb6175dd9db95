#include "biofm/ops/fp8/recipe.h"

#include <cmath>
#include <set>

#include "biofm/core/error.h"

namespace biofm::ops {

const char* fp8_scaling_name(Fp8Scaling s) {
  switch (s) {
    case Fp8Scaling::Current: return "Float8CurrentScaling";
    case Fp8Scaling::Delayed: return "DelayedScaling";
    case Fp8Scaling::Block: return "Float8BlockScaling";
    case Fp8Scaling::Mxfp8: return "MXFP8BlockScaling";
  }
  return "?";
}

std::string layer_quant_name(const LayerQuant& q) {
  switch (q.format) {
    case LayerFormat::Compute: return "";
    case LayerFormat::Fp8: return std::string("fp8 ") + fp8_scaling_name(q.scaling) + (q.fp8_dpa ? " + FP8 attention" : "");
    case LayerFormat::Fp4: return "fp4 NVFP4BlockScaling";
  }
  return "?";
}

namespace {

// The 1-based list as a set of 0-based layers; `key` names it in errors.
std::set<int> layer_set(const std::vector<double>& list, int layers, const char* key) {
  std::set<int> s;
  for (double v : list) {
    if (v != std::floor(v) || v < 1 || v > layers)
      fail(key, ": layer ", v, " is not a layer number in [1, ", layers, "] (the list is 1-indexed)");
    if (!s.insert(int(v) - 1).second) fail(key, ": layer ", int(v), " is listed twice");
  }
  return s;
}

}  // namespace

std::vector<LayerFormat> assign_layer_formats(int layers, bool fp8_enabled, const std::vector<double>& fp8_layers,
                                              bool fp4_enabled, const std::vector<double>& fp4_layers) {
  std::vector<LayerFormat> out(size_t(layers), LayerFormat::Compute);
  const bool fp8_given = fp8_enabled && !fp8_layers.empty(), fp4_given = fp4_enabled && !fp4_layers.empty();
  if (fp8_enabled && fp4_enabled && !fp8_given && !fp4_given)
    fail("fp8_config.enabled and fp4_config.enabled are both true but neither fp8_layers nor fp4_layers is given: "
         "list which layers run in which format (e.g. 'fp8_layers=[1,2,3]' 'fp4_layers=[4,5,6]')");
  std::set<int> f8 = fp8_given ? layer_set(fp8_layers, layers, "fp8_layers") : std::set<int>{};
  std::set<int> f4 = fp4_given ? layer_set(fp4_layers, layers, "fp4_layers") : std::set<int>{};
  for (int l : f8)
    if (f4.count(l)) fail("layer ", l + 1, " is in both fp8_layers and fp4_layers");
  for (int l = 0; l < layers; ++l) {
    if (fp8_enabled && !fp8_given && !f4.count(l)) f8.insert(l);
    if (fp4_enabled && !fp4_given && !f8.count(l)) f4.insert(l);
  }
  for (int l : f8) out[size_t(l)] = LayerFormat::Fp8;
  for (int l : f4) out[size_t(l)] = LayerFormat::Fp4;
  return out;
}

std::string describe_layer_quant(const std::vector<LayerQuant>& layers, const char* compute_name) {
  std::string s;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[i]) ++j;
    if (!s.empty()) s += ", ";
    s += (i == j ? "layer " + std::to_string(i + 1) : "layers " + std::to_string(i + 1) + "-" + std::to_string(j + 1));
    const std::string name = layer_quant_name(layers[i]);
    s += ": " + (name.empty() ? std::string(compute_name) : name);
    i = j + 1;
  }
  return s;
}

}  // namespace biofm::ops
