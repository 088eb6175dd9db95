// ops/options.h: defaults, set/get, and the attention backend names.
#include <gtest/gtest.h>

#include "biofm/core/error.h"
#include "biofm/ops/options.h"

namespace biofm {
namespace {

TEST(OpOptions, DefaultsSetAndParse) {
  const ops::OpOptions saved = ops::op_options();
  const ops::OpOptions d;
  EXPECT_EQ(d.attention, ops::AttentionBackend::Auto);
  EXPECT_TRUE(d.gemm_fused_gelu && d.sdpa_dense);
  EXPECT_FALSE(d.gemm_fused_bgrad || d.gemm_autotune || d.gemm_inplace_splitk || d.sdpa_autotune ||
               d.attention_check || d.attention_verbose);
  EXPECT_EQ(d.norm_chunks, 0);

  ops::OpOptions o;
  o.attention = ops::AttentionBackend::Fallback;
  o.sdpa_autotune = true;
  ops::set_op_options(o);
  EXPECT_EQ(ops::op_options().attention, ops::AttentionBackend::Fallback);
  EXPECT_TRUE(ops::op_options().sdpa_autotune);
  // The fused GELU GEMMs' tile-order knobs are range-checked where options are set.
  ops::OpOptions bad = o;
  bad.gemm_fused_raster = 3;
  EXPECT_THROW(ops::set_op_options(bad), Error);
  bad.gemm_fused_raster = 0;
  bad.gemm_fused_swizzle = -1;
  EXPECT_THROW(ops::set_op_options(bad), Error);
  EXPECT_TRUE(ops::op_options().sdpa_autotune);  // a refused set changes nothing
  ops::set_op_options(saved);

  for (auto b : {ops::AttentionBackend::Auto, ops::AttentionBackend::Cudnn, ops::AttentionBackend::Fallback})
    EXPECT_EQ(ops::parse_attention_backend(ops::attention_backend_name(b)), b);
  EXPECT_THROW(ops::parse_attention_backend("flash"), Error);
}

}  // namespace
}  // namespace biofm
