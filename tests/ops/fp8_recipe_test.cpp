// Layer-wise precision as the recipes resolve it (ops/fp8/recipe.h).
#include <gtest/gtest.h>

#include <functional>

#include "biofm/core/error.h"
#include "biofm/ops/fp8/recipe.h"
#include "testing.h"

using namespace biofm;
using namespace biofm::ops;

namespace {
using F = LayerFormat;
constexpr F C = F::Compute, E = F::Fp8, Q = F::Fp4;

using testkit::error_of;
}  // namespace

TEST(OpsFp8Recipe, LayerListsResolveAsTheRecipes) {
  EXPECT_EQ(assign_layer_formats(4, false, {}, false, {}), (std::vector<F>{C, C, C, C}));
  EXPECT_EQ(assign_layer_formats(4, true, {}, false, {}), (std::vector<F>{E, E, E, E}));
  EXPECT_EQ(assign_layer_formats(4, false, {}, true, {}), (std::vector<F>{Q, Q, Q, Q}));
  // Listed layers only (1-indexed); the rest bf16.
  EXPECT_EQ(assign_layer_formats(6, true, {2, 3}, false, {}), (std::vector<F>{C, E, E, C, C, C}));
  EXPECT_EQ(assign_layer_formats(6, true, {1, 2, 3}, true, {4, 5, 6}), (std::vector<F>{E, E, E, Q, Q, Q}));
  EXPECT_EQ(assign_layer_formats(6, true, {1, 6}, true, {3}), (std::vector<F>{E, C, Q, C, C, E}));
  // Both enabled, one list: the other format takes the rest.
  EXPECT_EQ(assign_layer_formats(6, true, {1, 2, 3}, true, {}), (std::vector<F>{E, E, E, Q, Q, Q}));
  EXPECT_EQ(assign_layer_formats(5, true, {}, true, {2}), (std::vector<F>{E, Q, E, E, E}));
  // The list of a format that is off is ignored (as the recipes do).
  EXPECT_EQ(assign_layer_formats(3, true, {}, false, {1}), (std::vector<F>{E, E, E}));
}

TEST(OpsFp8Recipe, BadListsFailNamingTheKey) {
  EXPECT_NE(error_of([] { assign_layer_formats(4, true, {}, true, {}); }).find("neither fp8_layers nor fp4_layers"),
            std::string::npos);
  EXPECT_NE(error_of([] { assign_layer_formats(4, true, {5}, false, {}); }).find("fp8_layers: layer 5"),
            std::string::npos);
  EXPECT_NE(error_of([] { assign_layer_formats(4, true, {0}, false, {}); }).find("1-indexed"), std::string::npos);
  EXPECT_NE(error_of([] { assign_layer_formats(4, false, {}, true, {1.5}); }).find("fp4_layers"), std::string::npos);
  EXPECT_NE(error_of([] { assign_layer_formats(4, true, {2, 2}, false, {}); }).find("listed twice"), std::string::npos);
  EXPECT_NE(error_of([] { assign_layer_formats(4, true, {1, 2}, true, {2}); }).find("layer 2 is in both"),
            std::string::npos);
}

TEST(OpsFp8Recipe, DescribesRunsOfLayers) {
  LayerQuant fp8, delayed, fp4;
  fp8.format = delayed.format = F::Fp8;
  delayed.scaling = Fp8Scaling::Delayed;
  fp4.format = F::Fp4;
  EXPECT_EQ(describe_layer_quant({fp8, fp8, LayerQuant{}, fp4}, "bf16"),
            "layers 1-2: fp8 Float8CurrentScaling, layer 3: bf16, layer 4: fp4 NVFP4BlockScaling");
  EXPECT_EQ(describe_layer_quant({delayed}, "bf16"), "layer 1: fp8 DelayedScaling");
}
