// Training curves of the precision recipes on the GPU: the mean loss per 20-step window over
// 200 steps of a tiny ESM-2 (proteins, masked LM) or a tiny DNA Llama (causal LM, GQA), built
// through the model registry, bf16-mixed, with each layer's quantization as given (empty: bf16).
// The recipes' tolerance against bf16 is 5% per window.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "biofm/data/dataset.h"
#include "biofm/models/registry.h"
#include "biofm/ops/fp8/recipe.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/schedule.h"
#include "cuda_test_util.h"

namespace biofm::testkit {

constexpr int kRecipeCurveLayers = 4;

// The model and batches (defaults: head dim 64, 4096-token batches of 256-token proteins or
// 1024-token DNA windows).
struct CurveOptions {
  int64_t hidden = 128;
  int64_t max_seq_length = 0, tokens_per_batch = 4096;  // 0: the family's default above
};

inline std::vector<double> recipe_curve(const std::string& family, const std::vector<ops::LayerQuant>& layers,
                                        const CurveOptions& o = {}) {
  const ModelFamily& f = family_named(family);
  const bool esm = family == "esm2";
  ModelShape shape;
  shape.hidden_size = o.hidden;
  shape.intermediate_size = 4 * o.hidden;
  shape.num_hidden_layers = kRecipeCurveLayers;
  shape.num_attention_heads = 2;
  if (!esm) {  // the DNA Llama: GQA, SwiGLU, untied head
    shape.vocab_size = 256;
    shape.num_key_value_heads = 1;
    shape.hidden_act = "silu";
    shape.tie_word_embeddings = false;
    shape.max_position_embeddings = 1024;
  }
  SequenceDataset data = SequenceDataset::load(std::string(BIOFM_SOURCE_DIR) + (esm ? "/data/proteins_sample.fasta" : "/data/dna_sample.fasta"),
                                               ReaderOptions{});
  DataOptions d;
  d.max_seq_length = o.max_seq_length ? o.max_seq_length : esm ? 256 : 1024;
  d.max_tokens_per_batch = o.tokens_per_batch;
  std::unique_ptr<BatchSource> batches = f.batches(d, data);
  BuildOptions bo;
  bo.precision = Precision::Bf16Mixed;
  bo.seed = 7;
  std::unique_ptr<LanguageModel> m = f.build(shape, Device::CUDA, bo);
  m->set_layer_quant(layers);
  AdamWConfig ac;
  ac.lr = 2e-3f;
  AdamW opt(m->params(), ac);
  const int steps = 200;
  ScheduleSpec sched{"warmup_linear", 20, steps, 0.9, 0.1};
  Tensor loss_acc = Tensor::zeros({1}, DType::F32, Device::CUDA);
  std::vector<double> windows(size_t(steps / 20), 0.0);
  for (int s = 0; s < steps; ++s) {
    Batch hb = batches->next();
    m->params().zero_grad();
    loss_acc.zero_();
    m->forward_backward(hb.to(Device::CUDA), 1.0f, loss_acc);  // summed token losses, as the trainer
    opt.step(float(ac.lr * lr_multiplier(sched, s)));
    m->quant_step_end();
    windows[size_t(s / 20)] += double(loss_acc.to(Device::CPU).f32()[0]) / double(hb.num_label_tokens) / 20.0;
  }
  return windows;
}

// Every window within 5% of bf16's, and the loss falling.
inline void expect_tracks(const std::string& name, const std::vector<double>& q, const std::vector<double>& bf16) {
  for (size_t w = 0; w < bf16.size(); ++w) {
    const double rel = std::fabs(q[w] - bf16[w]) / bf16[w];
    std::printf("[%s] steps %3zu-%3zu  bf16 %.4f  quantized %.4f  rel %.4f\n", name.c_str(), w * 20 + 1, w * 20 + 20,
                bf16[w], q[w], rel);
    EXPECT_LT(rel, 0.05) << name << " window " << w;
  }
  EXPECT_LT(q.back(), q.front() - 0.2) << name << ": the loss did not fall";
}

}  // namespace biofm::testkit
