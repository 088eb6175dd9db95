// cli/model_flags: --device, --precision and --ops parsing, and loading a model for inference (no
// gradient buffer).
#include "biofm/cli/model_flags.h"

#include <gtest/gtest.h>

#include "../testing.h"
#include "biofm/core/device_memory.h"
#include "biofm/ops/options.h"

using namespace biofm;

TEST(ModelFlags, DeviceAndPrecision) {
  EXPECT_EQ(parse_device("cpu"), Device::CPU);
  EXPECT_EQ(parse_device("auto"), cuda_available() ? Device::CUDA : Device::CPU);
  // A value --device never takes is a usage error (exit 2); a GPU this machine lacks, a runtime one.
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", ""}) EXPECT_THROW(parse_device(bad), UsageError) << bad;
  auto runtime_error = [](auto&& f) {
    try {
      f();
    } catch (const UsageError& e) {
      return "a usage error: " + std::string(e.what());
    } catch (const Error&) {
      return std::string("ok");
    }
    return std::string("no error");
  };
  if (!cuda_available()) {
    EXPECT_EQ(runtime_error([] { parse_device("cuda"); }), "ok");
    EXPECT_EQ(runtime_error([] { parse_device("cuda:0"); }), "ok");
  }
  EXPECT_EQ(runtime_error([] { parse_device("cuda:4096"); }), "ok");
  auto parsed = [](const char* s, Device d) {
    const InferencePrecision p = parse_inference_precision(s, d);
    return std::string(p.name()) + (p.params == Precision::Bf16 ? "/bf16 weights" : "/fp32 weights");
  };
  EXPECT_EQ(parsed("", Device::CPU), "fp32/fp32 weights");
  EXPECT_EQ(parsed("", Device::CUDA), "bf16/bf16 weights");
  EXPECT_EQ(parsed("fp32", Device::CUDA), "fp32/fp32 weights");
  EXPECT_EQ(parsed("bf16", Device::CUDA), "bf16/bf16 weights");
  if (cuda_compute_capability() >= 89) {
    EXPECT_EQ(parsed("fp8", Device::CUDA), "fp8/bf16 weights");  // FP8 GEMMs over bf16 weights
  } else {  // no FP8 tensor cores (or no GPU at all): a clear error, not bf16 labelled fp8
    try {
      parse_inference_precision("fp8", Device::CUDA);
      ADD_FAILURE() << "fp8 accepted without FP8 tensor cores";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("FP8 tensor cores"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(runtime_error([] { parse_inference_precision("bf16", Device::CPU); }), "ok");  // the CPU cannot
  EXPECT_EQ(runtime_error([] { parse_inference_precision("fp8", Device::CPU); }), "ok");
  EXPECT_THROW(parse_inference_precision("fp16", Device::CUDA), UsageError);  // exit 2
}

TEST(ModelFlags, LayersAndFamilies) {
  EXPECT_EQ(parse_layers("0,-1,2,2", 2), (std::vector<int>{0, 2}));
  EXPECT_THROW(parse_layers("1,x", 2), UsageError);  // not an integer: exit 2
  EXPECT_THROW(parse_layers(",", 2), UsageError);    // empty
  try {
    parse_layers("3", 2);  // well formed, but this model has layers 0..2: exit 1
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    ADD_FAILURE() << "a usage error: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers 0 (embeddings) to 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_family("esm2").name, "esm2");
  try {
    parse_family("protbert");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--family: unknown model family 'protbert'"), std::string::npos) << e.what();
  }
}

TEST(ModelFlags, InferenceModelsHoldNoGradients) {
  const std::string dir = std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/esm2_tiny";
  auto m = load_model(family_of_dir(dir), dir, Device::CPU);
  EXPECT_FALSE(m->params().has_gradients());
  auto trainable = load_model_dir(dir, Device::CPU);
  EXPECT_TRUE(trainable->params().has_gradients());
}

// --ops sets the ops.* options as the configs spell them; anything else is a usage error.
TEST(ModelFlags, OpsFlagSetsOpOptions) {
  const CommandSpec spec{"x", "", "", {ops_flag()}};
  auto parse = [&](std::string value) {
    std::string prog = "biofm", cmd = "x", flag = "--ops";
    char* argv[] = {prog.data(), cmd.data(), flag.data(), value.data()};
    return parse_flags(spec, 4, argv);
  };
  const testkit::ScopedOpOptions restore([](ops::OpOptions&) {});
  apply_ops_flag(parse("sdpa_autotune=true, ops.gemm_fused_gelu=false,,attention=fallback,"));
  EXPECT_TRUE(ops::op_options().sdpa_autotune);
  EXPECT_FALSE(ops::op_options().gemm_fused_gelu);
  EXPECT_EQ(ops::op_options().attention, ops::AttentionBackend::Fallback);
  // Keys not given go back to their defaults.
  apply_ops_flag(parse("sdpa_dense=false"));
  EXPECT_FALSE(ops::op_options().sdpa_autotune);
  EXPECT_FALSE(ops::op_options().sdpa_dense);
  for (const char* bad : {"sdpa_autotun=true", "sdpa_dense=maybe", "dataset.path=x", "sdpa_dense", "attention=cpu"}) {
    try {
      apply_ops_flag(parse(bad));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      if (std::string(bad) == "sdpa_autotun=true") EXPECT_NE(std::string(e.what()).find("sdpa_autotune"), std::string::npos) << e.what();
    }
  }
}
