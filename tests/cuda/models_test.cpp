// ESM-2 and Llama on the GPU: against the Hugging Face fixtures (fp32 and bf16-mixed), and
// a 200-step ESM-2 training run on real proteins against the CPU reference from one init.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/io/safetensors.h"
#include "biofm/models/esm2/model.h"
#include "biofm/models/registry.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/train/setup.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/schedule.h"
#include "hf_fixture.h"

using namespace biofm;

namespace {

std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

void check_fixture(const std::string& name, Precision precision, double logit_atol, double loss_atol,
                   double grad_cos_min) {
  SCOPED_TRACE(name);
  const std::string dir = src("tests/fixtures/" + name);
  auto model = load_model_dir(dir, Device::CUDA, precision);
  SafetensorsFile ref = read_safetensors(dir + "/reference.safetensors");
  std::vector<int64_t> row_of;
  Batch hb = testkit::hf_fixture_batch(ref, /*packed=*/true, model->family() == "llama", row_of);
  Batch b = hb.to(Device::CUDA);
  Tensor logits = model->logits(b).to(Device::CPU).to(DType::F32);
  const Tensor& ref_logits = ref.get("logits");
  const int64_t V = ref_logits.size(2);
  double worst = 0;
  for (size_t i = 0; i < row_of.size(); ++i) {
    if (row_of[i] < 0) continue;
    for (int64_t v = 0; v < V; ++v)
      worst = std::max(worst, double(std::fabs(logits.f32()[row_of[i] * V + v] - ref_logits.f32()[int64_t(i) * V + v])));
  }
  Tensor loss_acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
  model->params().zero_grad();
  model->forward_backward(b, 1.0f / float(hb.num_label_tokens), loss_acc);
  const double loss = double(loss_acc.to(Device::CPU).f32()[0]) / double(hb.num_label_tokens);
  const double ref_loss = ref.get("loss").f32()[0];
  // Gradients: cosine similarity per parameter.
  Tensor grads = model->params().grad_flat().to(Device::CPU);
  double worst_cos = 1;
  for (size_t p = 0; p < model->params().size(); ++p) {
    const std::string& pname = model->params().spec(p).name;
    const Tensor& g_ref = ref.get("grad." + pname);
    const Tensor g_rows =
        testkit::fixture_rows(grads.flat_slice(model->params().offset(p), model->params().spec(p).shape), g_ref, pname);
    const float* g = g_rows.f32();
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < g_ref.numel(); ++i) {
      dot += double(g[i]) * g_ref.f32()[i];
      na += double(g[i]) * g[i];
      nb += double(g_ref.f32()[i]) * g_ref.f32()[i];
    }
    const double cos = nb > 0 ? dot / std::sqrt(na * nb + 1e-300) : 1.0;
    worst_cos = std::min(worst_cos, cos);
    EXPECT_GT(cos, grad_cos_min) << model->params().spec(p).name;
  }
  std::printf("[cuda %s %s] max|dlogits| %.3e  |dloss| %.3e  worst grad cosine %.6f\n", name.c_str(),
              precision_name(precision), worst, std::fabs(loss - ref_loss), worst_cos);
  EXPECT_LT(worst, logit_atol);
  EXPECT_NEAR(loss, ref_loss, loss_atol);
}

}  // namespace

TEST(CudaEsm2, MatchesHuggingFaceFp32) {
  check_fixture("esm2_tiny", Precision::F32, 1e-3, 1e-4, 0.99999);
  check_fixture("esm2_t6shape", Precision::F32, 1e-3, 1e-4, 0.99999);
}

// Recipe tolerances (FACTS.md): loss atol 2e-2, logits atol 2.0 in bf16.
TEST(CudaEsm2, MatchesHuggingFaceBf16Mixed) {
  check_fixture("esm2_tiny", Precision::Bf16Mixed, 2.0, 2e-2, 0.99);
  check_fixture("esm2_t6shape", Precision::Bf16Mixed, 2.0, 2e-2, 0.99);
}

// Pure bf16 parameters: the fixture's weights rounded to bf16 on load, the same bf16 compute.
TEST(CudaEsm2, MatchesHuggingFaceBf16) {
  check_fixture("esm2_tiny", Precision::Bf16, 2.0, 2e-2, 0.99);
  check_fixture("esm2_t6shape", Precision::Bf16, 2.0, 2e-2, 0.99);
}

// Bf16 parameters are what Bf16Mixed's compute copy holds (the masters rounded to nearest
// even), and both feed the same kernels: loss and gradients agree.
TEST(CudaBf16, ForwardBackwardEqualsBf16Mixed) {
  for (const char* name : {"esm2_tiny", "llama_tiny"}) {
    SCOPED_TRACE(name);
    const std::string dir = src(std::string("tests/fixtures/") + name);
    auto mixed = load_model_dir(dir, Device::CUDA, Precision::Bf16Mixed);
    auto pure = load_model_dir(dir, Device::CUDA, Precision::Bf16);
    ASSERT_EQ(pure->params().dtype(), DType::BF16);
    ASSERT_FALSE(pure->params().compute_flat().defined());
    const Tensor wm = mixed->params().compute_flat().to(Device::CPU), wp = pure->params().flat().to(Device::CPU);
    ASSERT_EQ(wm.numel(), wp.numel());
    for (int64_t i = 0; i < wm.numel(); ++i) ASSERT_EQ(wm.bf()[i], wp.bf()[i]) << "weight element " << i;
    SafetensorsFile ref = read_safetensors(dir + "/reference.safetensors");
    std::vector<int64_t> row_of;
    Batch hb = testkit::hf_fixture_batch(ref, /*packed=*/true, mixed->family() == "llama", row_of);
    Batch b = hb.to(Device::CUDA);
    double loss[2];
    Tensor grads[2];
    LanguageModel* models[2] = {mixed.get(), pure.get()};
    for (int k = 0; k < 2; ++k) {
      Tensor acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
      models[k]->params().zero_grad();
      models[k]->forward_backward(b, 1.0f / float(hb.num_label_tokens), acc);
      loss[k] = double(acc.to(Device::CPU).f32()[0]);
      grads[k] = models[k]->params().grad_flat().to(Device::CPU);
    }
    EXPECT_NEAR(loss[1], loss[0], 1e-6 * std::fabs(loss[0]));
    double num = 0, den = 0;
    for (int64_t i = 0; i < grads[0].numel(); ++i) {
      const double d = double(grads[1].f32()[i]) - grads[0].f32()[i];
      num += d * d;
      den += double(grads[0].f32()[i]) * grads[0].f32()[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-5);
  }
}

// Llama (GQA with 2 groups, llama3 rope scaling; tied and untied). Recipe tolerances in bf16:
// loss atol 5e-3 (+ rtol 1e-2 of a ~7 loss), logits atol 1.5.
TEST(CudaLlama, MatchesHuggingFaceFp32) {
  check_fixture("llama_tiny", Precision::F32, 1e-3, 1e-4, 0.99999);
  check_fixture("llama_tied", Precision::F32, 1e-3, 1e-4, 0.99999);
}

TEST(CudaLlama, MatchesHuggingFaceBf16Mixed) {
  check_fixture("llama_tiny", Precision::Bf16Mixed, 1.5, 5e-3 + 1e-2 * 7.7, 0.99);
  check_fixture("llama_tied", Precision::Bf16Mixed, 1.5, 5e-3 + 1e-2 * 7.7, 0.99);
}

TEST(CudaLlama, MatchesHuggingFaceBf16) {
  check_fixture("llama_tiny", Precision::Bf16, 1.5, 5e-3 + 1e-2 * 7.7, 0.99);
  check_fixture("llama_tied", Precision::Bf16, 1.5, 5e-3 + 1e-2 * 7.7, 0.99);
}

// The ESM-2 MLP with GELU inside its GEMMs (hidden 1024: the CUTLASS kernels' range) against the
// unfused pair, in one forward + backward on real proteins: loss and every gradient agree within
// bf16 rounding, with all layers kept, all recomputed, and lean (recompute of the first layer
// only: the second drops its GELU output and redoes it in backward).
TEST(CudaEsm2, FusedGeluMlpMatchesUnfused) {
  Esm2Config c;
  c.hidden_size = 1024;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 16;  // head_dim 64
  c.intermediate_size = 2048;
  ReaderOptions ro;
  SequenceDataset data = SequenceDataset::load(src("data/proteins_sample.fasta"), ro);
  MlmOptions mo;
  mo.max_seq_length = 256;
  mo.max_tokens_per_batch = 2048;
  MlmBatcher batcher(data, mo);
  const Batch hb = batcher.next();
  const Batch b = hb.to(Device::CUDA);
  Esm2Model m(c, Device::CUDA, Precision::Bf16Mixed);
  m.params().init(11);
  struct Result {
    double loss;
    Tensor grad;
  };
  auto run = [&](bool fused, bool recompute, int recompute_layers) {
    testkit::ScopedOpOptions opt([&](ops::OpOptions& o) { o.gemm_fused_gelu = fused; });
    m.set_recompute(recompute, recompute_layers);
    const int64_t before = ops::cuda::gemm_gelu_fused_calls();
    Tensor acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
    m.params().zero_grad();
    m.forward_backward(b, 1.0f / float(hb.num_label_tokens), acc);
    // forward and backward of both layers (a recomputed layer runs its forward twice)
    const int64_t calls = ops::cuda::gemm_gelu_fused_calls() - before;
    const int64_t expected = !fused ? 0 : 4 + (recompute ? std::min(2, recompute_layers < 0 ? 2 : recompute_layers) : 0);
    EXPECT_EQ(calls, expected) << "fused " << fused << " recompute " << recompute << " " << recompute_layers;
    return Result{double(acc.to(Device::CPU).f32()[0]), m.params().grad_flat().to(Device::CPU)};
  };
  const Result ref = run(false, false, -1);
  for (auto [recompute, layers] : {std::pair{false, -1}, std::pair{true, -1}, std::pair{true, 1}}) {
    SCOPED_TRACE("recompute " + std::to_string(recompute) + " layers " + std::to_string(layers));
    const Result got = run(true, recompute, layers);
    EXPECT_NEAR(got.loss, ref.loss, 2e-3 * std::fabs(ref.loss));
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.grad.numel(); ++i) {
      const double d = double(got.grad.f32()[i]) - ref.grad.f32()[i];
      num += d * d;
      den += double(ref.grad.f32()[i]) * ref.grad.f32()[i];
    }
    EXPECT_LT(std::sqrt(num / den), 2e-2);
  }
  m.set_recompute(false);
}

// 200 steps on real proteins from one init and one data stream: the GPU (bf16-mixed, or pure
// bf16) and CPU (fp32) loss curves agree within rel_tol (averaged over windows of 20 steps).
static void check_training_curve(Precision gpu_precision, double rel_tol) {
  SCOPED_TRACE(precision_name(gpu_precision));
  Esm2Config c;
  c.hidden_size = 128;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 2;  // head_dim 64: the cuDNN path
  c.intermediate_size = 512;
  ReaderOptions ro;
  SequenceDataset data = SequenceDataset::load(src("data/proteins_sample.fasta"), ro);
  MlmOptions mo;
  mo.max_seq_length = 256;
  mo.max_tokens_per_batch = 4096;
  const int steps = 200;
  auto run = [&](Device d, Precision p) {
    Esm2Model m(c, d, p);
    m.params().init(7);
    AdamWConfig ac;
    ac.lr = 2e-3f;
    AdamW opt(m.params(), ac);
    ScheduleSpec sched{"warmup_linear", 20, steps, 0.9, 0.1};
    MlmBatcher batcher(data, mo);
    Tensor loss_acc = Tensor::zeros({1}, DType::F32, d);
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) {
      Batch hb = batcher.next();
      m.params().zero_grad();
      loss_acc.zero_();
      m.forward_backward(hb.to(d), 1.0f / float(hb.num_label_tokens), loss_acc);
      opt.step(float(ac.lr * lr_multiplier(sched, s)));
      losses.push_back(double(loss_acc.to(Device::CPU).f32()[0]) / double(hb.num_label_tokens));
    }
    return losses;
  };
  std::vector<double> gpu = run(Device::CUDA, gpu_precision);
  // The fp32 CPU curve is the same for every GPU precision (same model, init and data) and costs
  // minutes: compute it once per process.
  static const std::vector<double> cpu = run(Device::CPU, Precision::F32);
  for (int w = 0; w < steps / 20; ++w) {
    double a = 0, b = 0;
    for (int i = w * 20; i < (w + 1) * 20; ++i) a += gpu[size_t(i)], b += cpu[size_t(i)];
    std::printf("[curve %s] steps %3d-%3d  gpu %.4f  cpu %.4f  rel %.4f\n", precision_name(gpu_precision),
                w * 20 + 1, (w + 1) * 20, a / 20, b / 20, std::fabs(a - b) / b);
    EXPECT_LT(std::fabs(a - b) / b, rel_tol) << "window " << w;
  }
  EXPECT_LT(gpu.back(), gpu.front() - 0.3) << "loss did not fall";
}

TEST(CudaEsm2, TrainingCurveMatchesCpu) { check_training_curve(Precision::Bf16Mixed, 0.02); }

// Pure bf16 parameters lose updates below half a bf16 ulp; at this lr (2e-3, weights ~0.02)
// the curve should still track fp32 closely. 3% is a first bound, not yet measured.
TEST(CudaEsm2, TrainingCurveBf16MatchesCpu) { check_training_curve(Precision::Bf16, 0.03); }
