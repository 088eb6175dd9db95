// Block-scaled numerics on the GPU bit for bit against the CPU reference (ops/blockscale/op.h):
// Hopper's emulated MXFP8 / NVFP4, the native Float8BlockScaling codes and layers; training on
// CUDA with each recipe against bf16 within the recipes' tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "biofm/ops/blockscale/op.h"
#include "biofm/ops/gemm/op.h"
#include "cuda_test_util.h"
#include "recipe_curve.h"

using namespace biofm;
using namespace biofm::cudatest;
using ops::BlockQuant;
using ops::BlockScaleKind;
using ops::Fp8Type;

namespace {

std::vector<uint32_t> bits_of(const Tensor& t) {
  cuda_ctx::synchronize();
  Tensor h = t.device() == Device::CPU ? t : t.to(Device::CPU);
  std::vector<uint32_t> b(size_t(h.numel()));
  std::memcpy(b.data(), h.f32(), b.size() * 4);
  return b;
}

}  // namespace

TEST(CudaBlockScale, FakeQuantizeMatchesCpuBitForBit) {
  BIOFM_REQUIRE_GPU();
  Tensor x = randn({200, 300}, 21, 2.0f);  // partial blocks at both edges
  x.f32()[7] = 5000.0f;                    // an outlier
  x.f32()[300 * 3 + 1] = 0.0f;
  struct Case {
    BlockQuant q;
    const char* name;
  };
  std::vector<Case> cases = {
      {{BlockScaleKind::F32, Fp8Type::E4M3, 1, 128}, "F32 1x128 E4M3"},
      {{BlockScaleKind::F32Pow2, Fp8Type::E5M2, 128, 1}, "F32Pow2 128x1 E5M2"},
      {{BlockScaleKind::F32Pow2, Fp8Type::E4M3, 128, 128}, "F32Pow2 128x128"},
      {{BlockScaleKind::E8M0, Fp8Type::E4M3, 1, 32}, "E8M0 1x32"},
      {{BlockScaleKind::E8M0, Fp8Type::E5M2, 32, 1}, "E8M0 32x1 E5M2"},
      {{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 1, 16}, "NVFP4 1x16"},
      {{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 16, 16}, "NVFP4 16x16"},
  };
  BlockQuant sr{BlockScaleKind::Nvfp4, Fp8Type::E4M3, 16, 1};
  sr.stochastic = true;
  sr.seed = 77;
  sr.stream = 5;
  cases.push_back({sr, "NVFP4 16x1 stochastic"});
  for (const Case& c : cases) {
    Tensor want = Tensor::empty(x.shape(), DType::F32);
    ops::block_fake_quantize(want, x, c.q);
    Tensor xd = x.to(Device::CUDA), got = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
    ops::block_fake_quantize(got, xd, c.q);
    EXPECT_EQ(bits_of(got), bits_of(want)) << c.name;
    // BF16 in and out (the emulated GEMMs' operands): the CPU's values of the bf16 input, rounded.
    Tensor xb = to_device(x, DType::BF16), gb = Tensor::empty(x.shape(), DType::BF16, Device::CUDA);
    ops::block_fake_quantize(gb, xb, c.q);
    Tensor wb = Tensor::empty(x.shape(), DType::F32);
    ops::block_fake_quantize(wb, xb.to(Device::CPU), c.q);
    EXPECT_EQ(bits_of(to_host_f32(gb)), bits_of(round_to(wb, DType::BF16))) << c.name << " bf16";
  }
}

TEST(CudaBlockScale, HadamardMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  Tensor x = randn({64, 40}, 3);
  Tensor want = Tensor::empty(x.shape(), DType::F32);
  ops::hadamard16_rows(want, x, 9);
  Tensor got = Tensor::empty(x.shape(), DType::F32, Device::CUDA);
  ops::hadamard16_rows(got, x.to(Device::CUDA), 9);
  EXPECT_EQ(bits_of(got), bits_of(want));
}

// Each block-scaled recipe tracks bf16 within 5% per 20-step window, on ESM-2 and on the DNA
// Llama: Float8BlockScaling on the native block-scaled GEMMs (every projection of these models is
// a multiple of 128: nothing runs emulated) with HYBRID and with E4M3 gradients (the OpenGenome2
// recipe's fp8_format), MXFP8 and NVFP4 emulated.
TEST(CudaBlockScale, TrainingTracksBf16) {
  BIOFM_REQUIRE_GPU();
  ops::LayerQuant block, block_e4m3, mx, fp4;
  block.format = mx.format = ops::LayerFormat::Fp8;
  block.scaling = ops::Fp8Scaling::Block;
  block_e4m3 = block;
  block_e4m3.bwd = Fp8Type::E4M3;
  mx.scaling = ops::Fp8Scaling::Mxfp8;
  fp4.format = ops::LayerFormat::Fp4;
  for (const char* family : {"esm2", "llama"}) {
    const std::vector<double> bf16 = testkit::recipe_curve(family, {});
    for (const auto& [name, q] : {std::pair<const char*, ops::LayerQuant>{"Float8BlockScaling", block},
                                  {"Float8BlockScaling E4M3", block_e4m3},
                                  {"MXFP8BlockScaling", mx}, {"NVFP4BlockScaling", fp4}}) {
      const int64_t emulated_before = ops::cuda::fp8_block_emulated_calls();
      const std::vector<double> curve =
          testkit::recipe_curve(family, std::vector<ops::LayerQuant>(testkit::kRecipeCurveLayers, q));
      if (q.scaling == ops::Fp8Scaling::Block)
        EXPECT_EQ(ops::cuda::fp8_block_emulated_calls(), emulated_before) << family << ": Float8BlockScaling ran emulated";
      testkit::expect_tracks(std::string(family) + " " + name, curve, bf16);
    }
  }
}

// ---- Native Float8BlockScaling (cuBLASLt's block-scaled FP8 GEMMs).

namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  cuda_ctx::synchronize();
  Tensor h = t.device() == Device::CPU ? t : t.to(Device::CPU);
  std::vector<uint8_t> b(size_t(h.numel()));
  std::memcpy(b.data(), h.raw(), b.size());
  return b;
}

}  // namespace

// The codes and scales the native GEMMs read: every form, bit for bit the CPU's, and decoding
// them gives block_fake_quantize's values (checked on the CPU in tests/ops).
TEST(CudaBlockScale, BlockCodesMatchCpuBitForBit) {
  BIOFM_REQUIRE_GPU();
  for (const int64_t R : {300, 301, 256}) {  // partial last 128-row tiles; 301: a 4-row tail; 256: weights
    const bool weight_2d = R == 256;
    Tensor x = randn({R, 384}, 61, 2.0f);
    x.f32()[5] = 3000.0f;  // an outlier in one tile
    for (int64_t c = 0; c < 384; ++c) x.f32()[2 * 384 + c] = 0.0f;  // an all-zero row
    x.f32()[7 * 384 + 200] = INFINITY;                               // non-finite values: NaN codes,
    x.f32()[9 * 384 + 131] = NAN;                                    // and scale 1 where amax is inf
    for (const DType dt : {DType::F32, DType::BF16})
      for (const Fp8Type t : {Fp8Type::E4M3, Fp8Type::E5M2})
        for (const bool pow2 : {true, false}) {
          const std::string name = std::string(weight_2d ? "128x128 " : "tiles ") + std::to_string(R) + " " + dtname(dt) + " " +
                                   ops::fp8_type_name(t) + (pow2 ? " pow2" : " f32");
          Tensor xd = to_device(x, dt);
          ops::Fp8BlockCodes gr, gc, wr, wc;
          ops::fp8_block_quantize(&gr, &gc, xd, t, pow2, weight_2d);
          ops::fp8_block_quantize(&wr, &wc, to_host_f32(xd), t, pow2, weight_2d);
          EXPECT_EQ(bytes_of(gr.codes), bytes_of(wr.codes)) << name << " row codes";
          EXPECT_EQ(bits_of(gr.scale_inv), bits_of(wr.scale_inv)) << name << " row scales";
          ASSERT_EQ(gr.tail_scale_inv.defined(), R % 4 != 0) << name;
          if (R % 4) EXPECT_EQ(bits_of(gr.tail_scale_inv), bits_of(wr.tail_scale_inv)) << name << " tail scales";
          EXPECT_EQ(bytes_of(gc.codes), bytes_of(wc.codes)) << name << " column codes";
          EXPECT_EQ(bits_of(gc.scale_inv), bits_of(wc.scale_inv)) << name << " column scales";
        }
  }
}

// The native layer against the CPU reference (the emulation in fp32) on the same bf16 values:
// both sides see the same quantized operands, so what differs is the order of fp32 sums and the
// bf16 rounding of out and dx. All three GEMMs ran natively (nothing emulated), also with a
// token count that is not a multiple of 4 (cuBLASLt's limit: run as N - N % 4 rows plus a
// 4-row tail); the codes kept by forward serve backward.
TEST(CudaBlockScale, NativeLinearMatchesCpuReference) {
  BIOFM_REQUIRE_GPU();
  const int64_t I = 256, O = 384;
  const DType bf = DType::BF16;
  // 300 tokens: a partial token tile in the weight gradient; 301: also a 4-row tail (below)
  for (const auto& [N, f32_scales] : {std::pair<int64_t, bool>{300, false}, {300, true}, {301, false}}) {
  Tensor x = round_to(randn({N, I}, 71), bf), w = round_to(randn({O, I}, 72, 0.1f), bf);
  Tensor b = round_to(randn({O}, 73), bf), res = round_to(randn({N, O}, 74), bf);
  Tensor dout = round_to(randn({N, O}, 75, 1e-3f), bf), dw0 = randn({O, I}, 76, 1e-3f), db0 = randn({O}, 77, 1e-3f);
  {
    const std::string name = std::to_string(N) + (f32_scales ? " tokens, f32 scales" : " tokens, pow2 scales");
    const ops::Fp8BlockRecipe recipe{Fp8Type::E4M3, Fp8Type::E5M2, f32_scales};
    const int64_t emulated_before = ops::cuda::fp8_block_emulated_calls();

    Tensor out = Tensor::empty({N, O}, DType::F32);
    ops::linear_forward_fp8_block(out, x, w, b, res, recipe);
    Tensor d_out = Tensor::empty({N, O}, bf, Device::CUDA);
    poison(d_out);
    ops::Fp8SavedInput saved;
    ops::Fp8WeightCodes w_codes;
    Tensor dx_dev = to_device(x, bf), dw_dev = to_device(w, bf);
    ops::linear_forward_fp8_block(d_out, dx_dev, dw_dev, to_device(b, bf), to_device(res, bf), recipe, &saved,
                                  &w_codes);
    EXPECT_TRUE(close(name + " out", to_host_f32(d_out), out, tol(bf)));
    EXPECT_TRUE(saved.codes_t.defined()) << name;
    EXPECT_TRUE(w_codes.scale_inv_t.defined()) << name;

    Tensor dx = Tensor::empty({N, I}, DType::F32), dw = dw0.clone(), db = db0.clone();
    ops::linear_backward_fp8_block(dx, dw, db, dout, x, w, recipe);
    Tensor d_dx = Tensor::empty({N, I}, bf, Device::CUDA);
    poison(d_dx);
    Tensor d_dw = dw0.to(Device::CUDA), d_db = db0.to(Device::CUDA);
    ops::linear_backward_fp8_block(d_dx, d_dw, d_db, to_device(dout, bf), dx_dev, dw_dev, recipe, &saved, &w_codes);
    EXPECT_TRUE(close(name + " dx", to_host_f32(d_dx), dx, tol(bf)));
    EXPECT_TRUE(close(name + " dw", minus(to_host_f32(d_dw), dw0), minus(dw, dw0), 1e-4));
    EXPECT_TRUE(close(name + " dbias", minus(to_host_f32(d_db), db0), minus(db, db0), 1e-5));
    EXPECT_EQ(ops::cuda::fp8_block_emulated_calls(), emulated_before) << name << ": a GEMM ran emulated";

    // Without the kept codes, backward quantizes again: the same gradients bit for bit.
    Tensor d_dx2 = Tensor::empty({N, I}, bf, Device::CUDA), d_dw2 = dw0.to(Device::CUDA), none;
    ops::linear_backward_fp8_block(d_dx2, d_dw2, none, to_device(dout, bf), dx_dev, dw_dev, recipe);
    EXPECT_EQ(bytes_of(d_dx2), bytes_of(d_dx)) << name;
    EXPECT_EQ(bits_of(d_dw2), bits_of(d_dw)) << name;
  }
  }
}

// Shapes the native GEMMs do not take (features not multiples of 128) run emulated, with the
// same numerics as the CPU reference.
TEST(CudaBlockScale, OtherShapesRunEmulated) {
  BIOFM_REQUIRE_GPU();
  const int64_t N = 64, I = 192, O = 320;
  const DType bf = DType::BF16;
  Tensor x = round_to(randn({N, I}, 81), bf), w = round_to(randn({O, I}, 82, 0.1f), bf), none;
  const ops::Fp8BlockRecipe recipe;
  Tensor out = Tensor::empty({N, O}, DType::F32);
  ops::linear_forward_fp8_block(out, x, w, none, none, recipe);
  const int64_t before = ops::cuda::fp8_block_emulated_calls();
  Tensor d_out = Tensor::empty({N, O}, bf, Device::CUDA);
  ops::linear_forward_fp8_block(d_out, to_device(x, bf), to_device(w, bf), none, none, recipe);
  EXPECT_EQ(ops::cuda::fp8_block_emulated_calls(), before + 1);
  EXPECT_TRUE(close("out", to_host_f32(d_out), out, tol(bf)));
}
