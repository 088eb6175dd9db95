#include "biofm/ops/options.h"

#include <string>

#include "biofm/core/error.h"

namespace biofm::ops {

namespace {
OpOptions g_options;
}  // namespace

void set_op_options(const OpOptions& options) {
  if (options.gemm_fused_swizzle < 0 || options.gemm_fused_swizzle > 8 || options.gemm_fused_raster < 0 ||
      options.gemm_fused_raster > 2)
    fail("ops: gemm_fused_swizzle must be 0-8 and gemm_fused_raster 0-2, got ", options.gemm_fused_swizzle, " and ",
         options.gemm_fused_raster);
  g_options = options;
}
const OpOptions& op_options() { return g_options; }

AttentionBackend parse_attention_backend(std::string_view name) {
  if (name == "auto") return AttentionBackend::Auto;
  if (name == "cudnn") return AttentionBackend::Cudnn;
  if (name == "fallback") return AttentionBackend::Fallback;
  fail("attention backend must be one of auto, cudnn, fallback; got '", std::string(name), "'");
}

const char* attention_backend_name(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::Auto: return "auto";
    case AttentionBackend::Cudnn: return "cudnn";
    case AttentionBackend::Fallback: return "fallback";
  }
  return "?";
}

}  // namespace biofm::ops
