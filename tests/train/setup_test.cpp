// train/setup: config keys reach what they configure.
#include <gtest/gtest.h>

#include "biofm/train/setup.h"

using namespace biofm;

TEST(Setup, OpsKeysReachTheOps) {
  TrainConfig c = load_train_config_string("dataset:\n  path: x.fasta\n",
                                           {"ops.attention=fallback", "ops.gemm_fused_bgrad=true",
                                            "ops.gemm_autotune=true"});
  EXPECT_EQ(c.ops.attention, ops::AttentionBackend::Fallback);
  apply_op_options(c);
  EXPECT_EQ(ops::op_options().attention, ops::AttentionBackend::Fallback);
  EXPECT_TRUE(ops::op_options().gemm_fused_bgrad);
  EXPECT_TRUE(ops::op_options().gemm_autotune);
  apply_op_options(TrainConfig{});  // back to the defaults for the tests that follow
  EXPECT_EQ(ops::op_options().attention, ops::AttentionBackend::Auto);
  EXPECT_THROW(load_train_config_string("dataset:\n  path: x.fasta\n", {"ops.attention=flash"}), Error);
}

TEST(Setup, PrecisionIsFp32OnTheCpu) {
  TrainConfig c = load_train_config_string("dataset:\n  path: x.fasta\n", {"precision=bf16-mixed"});
  EXPECT_EQ(c.precision, Precision::Bf16Mixed);
  EXPECT_EQ(precision_for(c, Device::CPU), Precision::F32);
  EXPECT_EQ(precision_for(c, Device::CUDA), Precision::Bf16Mixed);
  // What train's and bench's banners say: what runs, and on the CPU what the config asked.
  EXPECT_EQ(describe_precision(c, Device::CPU), "fp32; precision=bf16-mixed is for CUDA");
  EXPECT_EQ(describe_precision(c, Device::CUDA), "bf16-mixed");
  c.precision = Precision::F32;
  EXPECT_EQ(describe_precision(c, Device::CPU), "fp32");
  c.fp8_config.enabled = true;
  EXPECT_EQ(describe_precision(c, Device::CPU), "fp32, FP8 " + c.fp8_config.fp8_format + " emulated");
  // The block-scaled formats by their own names (NVFP4 was "FP8 HYBRID" or not named at all).
  const auto banner = [](const std::vector<std::string>& ov, Device d) {
    std::vector<std::string> all = {"precision=bf16-mixed"};
    all.insert(all.end(), ov.begin(), ov.end());
    return describe_precision(load_train_config_string("dataset:\n  path: x.fasta\n", all), d);
  };
  EXPECT_EQ(banner({"fp8_config.enabled=true", "fp8_config.fp8_recipe=Float8BlockScaling"}, Device::CUDA),
            "bf16-mixed, FP8 HYBRID");
  EXPECT_EQ(banner({"fp4_config.enabled=true"}, Device::CUDA), "bf16-mixed, NVFP4 (E2M1 with E4M3 block scales) emulated");
  EXPECT_EQ(banner({"fp8_config.enabled=true", "fp8_config.fp8_recipe=NVFP4BlockScaling"}, Device::CUDA),
            "bf16-mixed, NVFP4 (E2M1 with E4M3 block scales) emulated");
  EXPECT_EQ(banner({"fp8_config.enabled=true", "fp8_config.fp8_recipe=MXFP8BlockScaling"}, Device::CUDA),
            "bf16-mixed, MXFP8 HYBRID (E8M0 block scales) emulated");
  EXPECT_EQ(banner({"fp8_config.enabled=true", "fp4_config.enabled=true", "fp8_layers=[1]"}, Device::CPU),
            "fp32; precision=bf16-mixed is for CUDA, FP8 HYBRID emulated, NVFP4 (E2M1 with E4M3 block scales) emulated");
}

// fp8_config / fp4_config / fp8_layers / fp4_layers into each layer's quantization.
TEST(Setup, PrecisionRecipeKeysReachTheLayers) {
  auto plan = [](const std::vector<std::string>& ov, Device d = Device::CPU, int layers = 4) {
    std::vector<std::string> all = {"precision=bf16-mixed"};  // (later overrides win)
    all.insert(all.end(), ov.begin(), ov.end());
    return layer_quant_for(load_train_config_string("dataset:\n  path: x.fasta\n", all), d, layers);
  };
  EXPECT_TRUE(plan({}).empty());
  // The recipes' spelling of DelayedScaling, with its kwargs.
  auto d = plan({"fp8_config.enabled=true", "fp8_config.fp8_recipe=transformer_engine.common.recipe.DelayedScaling",
                 "fp8_config.fp8_recipe_kwargs.amax_history_len=16",
                 "fp8_config.fp8_recipe_kwargs.amax_compute_algo=most_recent", "fp8_config.fp8_recipe_kwargs.margin=2",
                 "fp8_config.fp8_format=E4M3"});
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].format, ops::LayerFormat::Fp8);
  EXPECT_EQ(d[0].scaling, ops::Fp8Scaling::Delayed);
  EXPECT_EQ(d[0].delayed.amax_history_len, 16);
  EXPECT_FALSE(d[0].delayed.amax_compute_max);
  EXPECT_EQ(d[0].delayed.margin, 2);
  EXPECT_EQ(d[0].bwd, ops::Fp8Type::E4M3);
  auto b = plan({"fp8_config.enabled=true", "fp8_config.fp8_recipe=Float8BlockScaling",
                 "fp8_config.fp8_recipe_kwargs.use_f32_scales=true"});
  EXPECT_EQ(b[3].scaling, ops::Fp8Scaling::Block);
  EXPECT_TRUE(b[3].block_f32_scales);
  EXPECT_EQ(b[3].bwd, ops::Fp8Type::E5M2);  // HYBRID
  // Layer-wise, with NVFP4's switches.
  auto m = plan({"fp8_config.enabled=true", "fp4_config.enabled=true", "fp8_layers=[1]", "fp4_layers=[3,4]",
                 "fp4_config.fp4_recipe_kwargs.disable_rht=true",
                 "fp4_config.fp4_recipe_kwargs.disable_2d_quantization=true"});
  EXPECT_EQ(m[0].format, ops::LayerFormat::Fp8);
  EXPECT_EQ(m[1].format, ops::LayerFormat::Compute);
  EXPECT_EQ(m[2].format, ops::LayerFormat::Fp4);
  EXPECT_FALSE(m[3].nvfp4.random_hadamard);
  EXPECT_FALSE(m[3].nvfp4.weight_2d);
  EXPECT_TRUE(m[3].nvfp4.stochastic_rounding);
  // fp8_recipe NVFP4BlockScaling: the FP8 layers run NVFP4.
  EXPECT_EQ(plan({"fp8_config.enabled=true", "fp8_config.fp8_recipe=NVFP4BlockScaling"})[0].format,
            ops::LayerFormat::Fp4);
  // What cannot run fails naming the key.
  EXPECT_THROW(plan({"fp8_config.enabled=true", "fp8_config.fp8_recipe_kwargs.margin=1"}), Error);  // current scaling
  EXPECT_THROW(plan({"fp8_config.enabled=true", "fp8_config.fp8_recipe_kwargs.fp8_mha=true"}), Error);
  EXPECT_THROW(plan({"fp4_config.enabled=true", "precision=fp32"}, Device::CUDA), Error);
  EXPECT_THROW(plan({"fp8_config.enabled=true", "fp8_layers=[5]"}), Error);
  // null lists (the recipes' default) are "not given".
  EXPECT_EQ(plan({"fp8_config.enabled=true", "fp8_layers=null"}).size(), 4u);
}
