// Optimizer-state offload on the GPU (optimizer.offload): a tiny ESM-2 trained with its AdamW
// state in pinned host memory, updated by the CPU, follows the run whose state stays on the
// device, for bf16-mixed (masters moved to the host), fp32 and pure bf16 parameters (parameters
// copied down and back each step); and a checkpoint written with offload resumes without it (and
// the other way round) on the same curve.
//
// Tolerances: the CPU AdamW does the CUDA kernel's fp32 operations (tests/cuda/optim_test.cpp: at
// most 1 in 1000 elements not bit-identical), and the GPU run itself varies at fp32 rounding level
// (embedding gradients are summed with atomics); a master that moves by one fp32 ulp can change
// its bf16 compute copy by one bf16 ulp. So: losses within 1e-4 relative per step, masters within
// 1e-4 of the largest weight after 6 steps. A wrong, missing or doubled update moves weights by
// about lr = 2e-3, some 3e-2 of the largest weight.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "biofm/core/device_memory.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/models/esm2/model.h"
#include "biofm/train/checkpoint.h"
#include "biofm/train/optimizer.h"
#include "cuda_test_util.h"

using namespace biofm;

namespace {

std::string src(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

constexpr double kLossTol = 1e-4;    // relative, per step
constexpr double kMasterTol = 1e-4;  // relative to the largest master weight

Esm2Config tiny_esm() {
  Esm2Config c;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 128;
  return c;
}

std::vector<Batch> protein_batches(int n) {
  ReaderOptions ro;
  static SequenceDataset data = SequenceDataset::load(src("data/proteins_sample.fasta"), ro);
  MlmOptions mo;
  mo.max_seq_length = 128;
  mo.max_tokens_per_batch = 1024;
  MlmBatcher batcher(data, mo);
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) out.push_back(batcher.next());
  return out;
}

struct Trainee {
  std::unique_ptr<Esm2Model> model;
  std::unique_ptr<AdamW> opt;
  Trainee(Precision p, bool offload) : model(std::make_unique<Esm2Model>(tiny_esm(), Device::CUDA, p)) {
    model->params().init(7);
    AdamWConfig ac;
    ac.lr = 2e-3f;
    ac.max_grad_norm = 0.5f;  // (engages: clipping is part of what must match)
    ac.offload = offload;
    opt = std::make_unique<AdamW>(model->params(), ac);
  }
  // Steps [from, to) on batches[...]: summed token losses with the label count as grad_divisor,
  // as TrainStep does. Returns the mean loss of each step.
  std::vector<double> train(const std::vector<Batch>& batches, int from, int to) {
    std::vector<double> losses;
    Tensor loss = Tensor::zeros({1}, DType::F32, Device::CUDA);
    for (int s = from; s < to; ++s) {
      const Batch& hb = batches[size_t(s)];
      const Tensor count = Tensor::from_f32({1}, {float(hb.num_label_tokens)}).to(Device::CUDA);
      model->params().zero_grad();
      loss.zero_();
      model->forward_backward(hb.to(Device::CUDA), 1.0f, loss);
      opt->step(2e-3f, count);
      losses.push_back(double(loss.to(Device::CPU).f32()[0]) / double(hb.num_label_tokens));
    }
    return losses;
  }
  Tensor masters() const { return model->params().flat().to(Device::CPU).to(DType::F32); }
};

void expect_close(const std::vector<double>& a, const std::vector<double>& b, const Tensor& ma, const Tensor& mb) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::abs(a[i] - b[i]), kLossTol * std::abs(b[i])) << "loss of step " << i << ": " << a[i] << " vs " << b[i];
  ASSERT_EQ(ma.numel(), mb.numel());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < ma.numel(); ++i) {
    diff = std::max(diff, double(std::abs(ma.f32()[i] - mb.f32()[i])));
    scale = std::max(scale, double(std::abs(mb.f32()[i])));
  }
  EXPECT_LE(diff, kMasterTol * scale) << "largest master difference";
}

}  // namespace

TEST(CudaOptimizerOffload, TrainsAsTheDeviceStateDoes) {
  BIOFM_REQUIRE_GPU();
  const std::vector<Batch> batches = protein_batches(6);
  for (Precision p : {Precision::Bf16Mixed, Precision::F32, Precision::Bf16}) {
    SCOPED_TRACE(precision_name(p));
    Trainee device(p, false), host(p, true);
    ASSERT_TRUE(host.opt->offloaded());
    const int64_t n = host.model->params().numel();
    if (p == Precision::Bf16Mixed) {
      // The masters themselves moved: 4 + 8 bytes per parameter.
      EXPECT_EQ(host.model->params().flat().device(), Device::CPU);
      EXPECT_EQ(host.opt->offloaded_bytes(), 12 * n);
    } else {
      EXPECT_EQ(host.model->params().flat().device(), Device::CUDA);
      EXPECT_EQ(host.opt->offloaded_bytes(), 8 * n);
    }
    EXPECT_EQ(host.opt->moment("exp_avg").device(), Device::CPU);
    const std::vector<double> a = host.train(batches, 0, 6), b = device.train(batches, 0, 6);
    EXPECT_LT(a.back(), a.front()) << "loss did not fall";
    expect_close(a, b, host.masters(), device.masters());
  }
}

TEST(CudaOptimizerOffload, CheckpointsResumeWithOrWithoutOffload) {
  BIOFM_REQUIRE_GPU();
  const std::vector<Batch> batches = protein_batches(6);
  Trainee straight(Precision::Bf16Mixed, false);
  const std::vector<double> want = straight.train(batches, 0, 6);
  for (bool save_offloaded : {true, false}) {
    SCOPED_TRACE(save_offloaded ? "saved offloaded, resumed on the device" : "saved on the device, resumed offloaded");
    const std::string dir = testing::TempDir() + "/biofm_cuda_offload_" + (save_offloaded ? "on" : "off");
    std::filesystem::remove_all(dir);
    Trainee first(Precision::Bf16Mixed, save_offloaded);
    std::vector<double> got = first.train(batches, 0, 3);
    save_training_checkpoint(dir, TrainerState{3, 0, "{}", "seed: 7\n"}, *first.model, *first.opt, 2);
    Trainee second(Precision::Bf16Mixed, !save_offloaded);
    ASSERT_TRUE(resume_training_checkpoint(dir, *second.model, *second.opt).has_value());
    EXPECT_EQ(second.opt->steps_taken(), 3);
    for (double l : second.train(batches, 3, 6)) got.push_back(l);
    expect_close(got, want, second.masters(), straight.masters());
  }
}
