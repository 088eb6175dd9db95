// Block-scaled numerics on the GPU (Hopper's emulated Float8BlockScaling / MXFP8 / NVFP4) bit for
// bit against the CPU reference (ops/blockscale/op.h), and emulated training on CUDA against
// bf16 within the recipes' tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/models/llama/model.h"
#include "biofm/ops/blockscale/op.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/schedule.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;
using ops::BlockQuant;
using ops::BlockScaleKind;
using ops::Fp8Type;

namespace {

std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

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

namespace {

std::vector<double> llama_curve(const std::vector<ops::LayerQuant>& layers) {
  LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 128;
  c.intermediate_size = 512;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 1024;
  ReaderOptions ro;
  SequenceDataset data = SequenceDataset::load(src("data/dna_sample.fasta"), ro);
  CausalLmOptions co;
  co.max_seq_length = 1024;
  co.max_tokens_per_batch = 4096;
  CausalLmBatcher batcher(data, co);
  LlamaModel m(c, Device::CUDA, Precision::Bf16Mixed);
  m.params().init(7);
  m.set_layer_quant(layers);
  AdamWConfig ac;
  ac.lr = 2e-3f;
  AdamW opt(m.params(), ac);
  const int steps = 200;
  ScheduleSpec sched{"warmup_linear", 20, steps, 0.9, 0.1};
  Tensor loss_acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
  std::vector<double> windows(size_t(steps / 20), 0.0);
  for (int s = 0; s < steps; ++s) {
    Batch hb = batcher.next();
    m.params().zero_grad();
    loss_acc.zero_();
    m.forward_backward(hb.to(Device::CUDA), 1.0f, loss_acc);
    opt.step(float(ac.lr * lr_multiplier(sched, s)));
    m.quant_step_end();
    windows[size_t(s / 20)] += double(loss_acc.to(Device::CPU).f32()[0]) / double(hb.num_label_tokens) / 20.0;
  }
  return windows;
}

}  // namespace

// Emulated on Hopper: each block-scaled recipe tracks bf16 within 5% per 20-step window.
TEST(CudaBlockScale, EmulatedTrainingTracksBf16) {
  BIOFM_REQUIRE_GPU();
  const std::vector<double> bf16 = llama_curve({});
  ops::LayerQuant block, mx, fp4;
  block.format = mx.format = ops::LayerFormat::Fp8;
  block.scaling = ops::Fp8Scaling::Block;
  mx.scaling = ops::Fp8Scaling::Mxfp8;
  fp4.format = ops::LayerFormat::Fp4;
  for (const auto& [name, q] : {std::pair<const char*, ops::LayerQuant>{"Float8BlockScaling", block},
                                {"MXFP8BlockScaling", mx}, {"NVFP4BlockScaling", fp4}}) {
    const std::vector<double> curve = llama_curve(std::vector<ops::LayerQuant>(4, q));
    for (size_t w = 0; w < bf16.size(); ++w) {
      const double rel = std::fabs(curve[w] - bf16[w]) / bf16[w];
      std::printf("[%s emulated] steps %3zu-%3zu  bf16 %.4f  quantized %.4f  rel %.4f\n", name, w * 20 + 1,
                  w * 20 + 20, bf16[w], curve[w], rel);
      EXPECT_LT(rel, 0.05) << name << " window " << w;
    }
    EXPECT_LT(curve.back(), curve.front() - 0.2) << name;
  }
}
