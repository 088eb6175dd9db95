// The side stream (core/side_stream.h): a scope's memory stays out of the allocator until the
// side stream has run the scope's work, and a training step with the weight gradients on the
// side stream (ops.wgrad_stream) computes what one on the compute stream alone does.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/side_stream.h"
#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/models/esm2/model.h"
#include "biofm/models/llama/model.h"
#include "biofm/ops/gemm/op.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

// A host function queued on a stream that holds it until the test lets go.
struct Gate {
  std::atomic<bool> open{false};
  static void CUDART_CB wait(void* p) {
    auto* g = static_cast<Gate*>(p);
    while (!g->open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

}  // namespace

// A block freed inside a scope, and a tensor the scope holds, are not handed out again while the
// side stream has not run the scope's work; after join() they are.
TEST(CudaSideStream, ScopeMemoryWaitsForTheSideStream) {
  BIOFM_REQUIRE_GPU();
  side_stream::join();
  const int64_t n = 3 << 20;  // 12 MiB of f32: its own size class in the allocator
  Gate gate;
  void *held_ptr = nullptr, *scratch_ptr = nullptr;
  {
    Tensor held = Tensor::zeros({n}, DType::F32, Device::CUDA);
    held_ptr = held.raw();
    side_stream::Scope scope(true);
    ASSERT_TRUE(scope.active());
    EXPECT_EQ(cuda_ctx::stream(), cuda_ctx::compute_stream());  // not entered yet
    scope.enter();
    EXPECT_EQ(cuda_ctx::stream(), cuda_ctx::side_stream());
    {
      side_stream::Scope nested(true);  // already on the side stream: does nothing
      EXPECT_FALSE(nested.active());
    }
    EXPECT_EQ(cuda_ctx::stream(), cuda_ctx::side_stream());
    ASSERT_EQ(cudaLaunchHostFunc(cuda_ctx::stream(), &Gate::wait, &gate), cudaSuccess);
    Tensor scratch = Tensor::zeros({n}, DType::F32, Device::CUDA);  // queued behind the gate
    scratch_ptr = scratch.raw();
    scope.hold(held);
  }  // scratch and held dropped here by the host
  EXPECT_EQ(cuda_ctx::stream(), cuda_ctx::compute_stream());
  EXPECT_TRUE(side_stream::pending());
  {
    Tensor a = Tensor::empty({n}, DType::F32, Device::CUDA), b = Tensor::empty({n}, DType::F32, Device::CUDA);
    for (void* p : {a.raw(), b.raw()}) {
      EXPECT_NE(p, held_ptr) << "a held tensor was handed out while the side stream still needs it";
      EXPECT_NE(p, scratch_ptr) << "a block freed in the scope was handed out before its work ran";
    }
  }
  gate.open = true;
  side_stream::join();
  EXPECT_FALSE(side_stream::pending());
  cuda_ctx::synchronize();
  Tensor c = Tensor::empty({n}, DType::F32, Device::CUDA), d = Tensor::empty({n}, DType::F32, Device::CUDA);
  const bool reused = c.raw() == held_ptr || c.raw() == scratch_ptr || d.raw() == held_ptr || d.raw() == scratch_ptr;
  EXPECT_TRUE(reused) << "after join() the scope's blocks go back to the allocator";
}

namespace {

struct Case {
  const char* name;
  std::function<std::unique_ptr<LanguageModel>()> make;
  Batch a, b;  // two micro batches: the gradients accumulate across them
  std::string fc1, fc2;  // the top layer's MLP weights (no atomic adds in backward before them)
  int layers;
};

struct Run {
  Tensor grads, fc1, fc2;
  float loss = 0;
  size_t peak = 0;
};

Run run_step(const Case& c, bool beside, int fp8) {
  testkit::ScopedOpOptions opt([&](ops::OpOptions& o) { o.wgrad_stream = beside; });
  std::unique_ptr<LanguageModel> m = c.make();
  m->params().init(5);
  if (fp8 == 1) m->set_fp8(ops::Fp8Recipe{});
  if (fp8 == 2) {
    ops::LayerQuant lq;
    lq.format = ops::LayerFormat::Fp8;
    lq.scaling = ops::Fp8Scaling::Delayed;
    m->set_layer_quant(std::vector<ops::LayerQuant>(size_t(c.layers), lq));
  }
  Tensor loss_acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
  m->params().zero_grad();
  cuda_ctx::synchronize();
  device_memory_reset_peak();
  const size_t base = device_memory_stats().allocated_bytes;  // the model, workspaces
  m->forward_backward(c.a, 1e-3f, loss_acc);
  m->forward_backward(c.b, 1e-3f, loss_acc);
  EXPECT_FALSE(side_stream::pending()) << "the model's backward must join the side stream";
  cuda_ctx::synchronize();
  Run r;
  r.peak = device_memory_stats().peak_allocated_bytes - base;
  r.loss = loss_acc.to(Device::CPU).f32()[0];
  r.grads = to_host_f32(m->params().grad_flat());
  r.fc1 = to_host_f32(m->params().grad(c.fc1));
  r.fc2 = to_host_f32(m->params().grad(c.fc2));
  return r;
}

void expect_same_gradients(const Case& c) {
  for (int fp8 : {0, 1, 2}) {
    SCOPED_TRACE(std::string(c.name) + (fp8 == 0 ? " bf16" : fp8 == 1 ? " FP8 current" : " FP8 delayed"));
    (void)run_step(c, true, fp8);  // (the first run on the side stream allocates its cuBLASLt workspace)
    const Run off = run_step(c, false, fp8), off2 = run_step(c, false, fp8), on = run_step(c, true, fp8);
    EXPECT_TRUE(std::isfinite(off.loss));
    EXPECT_EQ(on.loss, off.loss);
    EXPECT_GT(rel_error(off.fc1, Tensor::zeros(off.fc1.shape(), DType::F32)), 0.0);
    // The top layer's MLP weight gradients come before any atomic add of backward: same bits.
    EXPECT_EQ(rel_error(on.fc1, off.fc1), 0.0) << "the top layer's first MLP weight gradient differs";
    EXPECT_EQ(rel_error(on.fc2, off.fc2), 0.0) << "the top layer's second MLP weight gradient differs";
    // Everything: within what two runs on the compute stream alone differ by (cuDNN's attention
    // backward and the embedding backward add with atomics).
    const double noise = rel_error(off2.grads, off.grads), diff = rel_error(on.grads, off.grads);
    std::printf("[side stream] %s fp8=%d: gradients beside vs not %.2e (not vs not %.2e); "
                "step peak %.1f / %.1f MiB above the model\n",
                c.name, fp8, diff, noise, double(on.peak) / (1 << 20), double(off2.peak) / (1 << 20));
    EXPECT_LE(diff, std::max(4 * noise, 1e-6));
    // The memory the side stream's work holds is bounded (a few linears' worth, released as the
    // compute stream passes them), not kept until the end of backward.
    EXPECT_LE(double(on.peak), 1.1 * double(off2.peak));
  }
}

}  // namespace

// ops.wgrad_stream: ESM-2 (GELU MLP, biases, the fused GELU GEMMs in bf16) and Llama (SwiGLU,
// no biases), bf16 and FP8 with current and delayed scaling, two accumulated micro batches.
TEST(CudaSideStream, WeightGradientsBesideTrainAsOnOneStream) {
  BIOFM_REQUIRE_GPU();
  ReaderOptions ro;
  Esm2Config ec;
  ec.hidden_size = 256;
  ec.num_hidden_layers = 3;
  ec.num_attention_heads = 4;
  ec.intermediate_size = 1024;
  SequenceDataset proteins = SequenceDataset::load(src("data/proteins_sample.fasta"), ro);
  MlmOptions mo;
  mo.max_seq_length = 256;
  mo.max_tokens_per_batch = 4096;
  MlmBatcher mlm(proteins, mo);
  const std::string etop = "esm.encoder.layer.2.";
  Batch e1 = mlm.next().to(Device::CUDA), e2 = mlm.next().to(Device::CUDA);
  expect_same_gradients({"esm2", [&] { return std::make_unique<Esm2Model>(ec, Device::CUDA, Precision::Bf16Mixed); },
                         e1, e2, etop + "intermediate.dense.weight", etop + "output.dense.weight", 3});
  LlamaConfig lc;
  lc.vocab_size = 256;
  lc.hidden_size = 128;
  lc.intermediate_size = 512;
  lc.num_hidden_layers = 3;
  lc.num_attention_heads = 2;
  lc.num_key_value_heads = 1;
  lc.max_position_embeddings = 1024;
  SequenceDataset dna = SequenceDataset::load(src("data/dna_sample.fasta"), ro);
  CausalLmOptions co;
  co.max_seq_length = 1024;
  co.max_tokens_per_batch = 4096;
  CausalLmBatcher clm(dna, co);
  const std::string ltop = "model.layers.2.";
  Batch l1 = clm.next().to(Device::CUDA), l2 = clm.next().to(Device::CUDA);
  expect_same_gradients({"llama", [&] { return std::make_unique<LlamaModel>(lc, Device::CUDA, Precision::Bf16Mixed); },
                         l1, l2, ltop + "mlp.gate_proj.weight", ltop + "mlp.down_proj.weight", 3});
}
