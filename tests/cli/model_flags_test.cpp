// cli/model_flags: --device and --precision parsing, and loading a model for inference (no
// gradient buffer).
#include "biofm/cli/model_flags.h"

#include <gtest/gtest.h>

#include "biofm/core/device_memory.h"

using namespace biofm;

TEST(ModelFlags, DeviceAndPrecision) {
  EXPECT_EQ(parse_device("cpu"), Device::CPU);
  EXPECT_EQ(parse_device("auto"), cuda_available() ? Device::CUDA : Device::CPU);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", ""}) EXPECT_THROW(parse_device(bad), Error) << bad;
  if (!cuda_available()) {
    EXPECT_THROW(parse_device("cuda"), Error);
    EXPECT_THROW(parse_device("cuda:0"), Error);
  }
  EXPECT_EQ(parse_inference_precision("", Device::CPU), Precision::F32);
  EXPECT_EQ(parse_inference_precision("", Device::CUDA), Precision::Bf16);
  EXPECT_EQ(parse_inference_precision("fp32", Device::CUDA), Precision::F32);
  EXPECT_EQ(parse_inference_precision("bf16", Device::CUDA), Precision::Bf16);
  EXPECT_THROW(parse_inference_precision("bf16", Device::CPU), Error);
  EXPECT_THROW(parse_inference_precision("fp16", Device::CUDA), Error);
}

TEST(ModelFlags, InferenceModelsHoldNoGradients) {
  const std::string dir = std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/esm2_tiny";
  auto m = load_model(family_of_dir(dir), dir, Device::CPU);
  EXPECT_FALSE(m->params().has_gradients());
  auto trainable = load_model_dir(dir, Device::CPU);
  EXPECT_TRUE(trainable->params().has_gradients());
}
