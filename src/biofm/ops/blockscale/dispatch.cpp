// Backend choice of the block-scaled numerics.
#include "biofm/ops/blockscale/op.h"

namespace biofm::ops {

void block_fake_quantize(Tensor& out, const Tensor& x, const BlockQuant& q) {
  BIOFM_DISPATCH(x.device(), block_fake_quantize, out, x, q);
}

void hadamard16_rows(Tensor& out, const Tensor& x, uint64_t seed) {
  BIOFM_DISPATCH(x.device(), hadamard16_rows, out, x, seed);
}

void fp8_block_quantize(Fp8BlockCodes* rows, Fp8BlockCodes* cols, const Tensor& x, Fp8Type t, bool pow2_scales,
                        bool weight_2d) {
  BIOFM_DISPATCH(x.device(), fp8_block_quantize, rows, cols, x, t, pow2_scales, weight_2d);
}

}  // namespace biofm::ops
