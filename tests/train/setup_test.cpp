// train/setup: config keys reach what they configure.
#include <gtest/gtest.h>

#include "biofm/train/setup.h"

using namespace biofm;

TEST(Setup, OpsKeysReachTheOps) {
  TrainConfig c = load_train_config_string("dataset:\n  path: x.fasta\n",
                                           {"ops.attention=fallback", "ops.gemm_fused_bgrad=false"});
  EXPECT_EQ(c.ops.attention, ops::AttentionBackend::Fallback);
  apply_op_options(c);
  EXPECT_EQ(ops::op_options().attention, ops::AttentionBackend::Fallback);
  EXPECT_FALSE(ops::op_options().gemm_fused_bgrad);
  apply_op_options(TrainConfig{});  // back to the defaults for the tests that follow
  EXPECT_EQ(ops::op_options().attention, ops::AttentionBackend::Auto);
  EXPECT_THROW(load_train_config_string("dataset:\n  path: x.fasta\n", {"ops.attention=flash"}), Error);
}

TEST(Setup, PrecisionIsFp32OnTheCpu) {
  TrainConfig c = load_train_config_string("dataset:\n  path: x.fasta\n", {"precision=bf16-mixed"});
  EXPECT_EQ(c.precision, Precision::Bf16Mixed);
  EXPECT_EQ(precision_for(c, Device::CPU), Precision::F32);
  EXPECT_EQ(precision_for(c, Device::CUDA), Precision::Bf16Mixed);
}
