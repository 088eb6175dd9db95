// TransformerLM's layer hook: forward announces each layer before and after it runs, backward
// before each layer and once its gradients are final (GradsReady, last layer first); when
// GradsReady fires, that layer's gradients equal the gradients after the whole backward; the
// layers' flat ranges tile their parameters.
#include <gtest/gtest.h>

#include <cmath>

#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/ops/fp8/recipe.h"
#include "models/tiny_models.h"

using namespace biofm;

TEST(TransformerLM, LayerHookSeesEveryLayerAndFinalGradients) {
  for (const char* name : {"esm2", "llama"}) {
    SCOPED_TRACE(name);
    const ModelFamily& f = family_named(name);
    std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, 3), Device::CPU, BuildOptions{});
    SequenceDataset data = testkit::bundled_data(f);
    Batch b = f.batches(testkit::small_batches(), data)->next();

    for (int recompute : {0, 1}) {
      m->set_recompute(recompute != 0, -1);
      std::vector<int> order;
      std::string events;
      std::vector<std::vector<float>> at_hook(3);
      m->set_layer_hook([&](LayerEvent e, int l) {
        const char* tag[] = {"F", "f", "B", "G"};
        events += tag[int(e)] + std::to_string(l) + " ";
        if (e != LayerEvent::GradsReady || l < 0) return;
        order.push_back(l);
        auto [lo, hi] = m->layer_param_range(l);
        const float* g = m->params().grad_flat().f32();
        at_hook[size_t(l)].assign(g + lo, g + hi);
      });
      m->params().zero_grad();
      Tensor loss = Tensor::zeros({1}, DType::F32);
      m->forward_backward(b, 1.0f / float(b.num_label_tokens), loss);
      EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
      EXPECT_EQ(events, "F-1 F0 f0 F1 f1 F2 f2 B2 G2 B1 G1 B0 G0 G-1 ");
      for (int l = 0; l < 3; ++l) {
        auto [lo, hi] = m->layer_param_range(l);
        ASSERT_EQ(int64_t(at_hook[size_t(l)].size()), hi - lo);
        const float* g = m->params().grad_flat().f32();
        double nonzero = 0;
        for (int64_t i = lo; i < hi; ++i) {
          ASSERT_EQ(g[i], at_hook[size_t(l)][size_t(i - lo)]) << "layer " << l << " element " << i - lo;
          nonzero += g[i] != 0;
        }
        EXPECT_GT(nonzero, 0.3 * double(hi - lo));
        if (l > 0) EXPECT_LE(m->layer_param_range(l - 1).second, lo) << "layer ranges do not overlap";
      }
      m->set_layer_hook(nullptr);
    }
  }
}

// NVFP4's random Hadamard transform of the weight-gradient GEMM's inputs mixes groups of 16
// token rows; a batch of any other length is padded with zero rows for it, not left
// untransformed. With stochastic rounding off, turning the transform off must change the
// weight gradients (other roundings), while both stay near the unquantized ones.
TEST(TransformerLM, Nvfp4HadamardTransformAppliesAtAnyTokenCount) {
  const ModelFamily& f = family_named("llama");
  SequenceDataset data = testkit::bundled_data(f);
  CausalLmOptions co;
  co.max_seq_length = 21;  // 19 bases + <BOS>/<EOS>: one window of 21 tokens per batch
  co.max_tokens_per_batch = 21;
  co.stride = 0;
  co.shuffle = false;
  CausalLmBatcher batcher(data, co);
  Batch b = batcher.next();
  ASSERT_NE(b.num_rows() % 16, 0);

  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, 2), Device::CPU, BuildOptions{});
  auto grads = [&](bool fp4, bool rht) {
    ops::LayerQuant q;
    if (fp4) {
      q.format = ops::LayerFormat::Fp4;
      q.nvfp4.random_hadamard = rht;
      q.nvfp4.stochastic_rounding = false;
    }
    m->set_layer_quant(fp4 ? std::vector<ops::LayerQuant>(2, q) : std::vector<ops::LayerQuant>{});
    m->params().zero_grad();
    Tensor loss = Tensor::zeros({1}, DType::F32);
    m->forward_backward(b, 1.0f / float(b.num_label_tokens), loss);
    auto [lo, hi] = m->layer_param_range(1);
    const float* g = m->params().grad_flat().f32();
    return std::vector<float>(g + lo, g + hi);
  };
  const std::vector<float> exact = grads(false, false), with = grads(true, true), without = grads(true, false);
  auto rel = [&](const std::vector<float>& a) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) num += (a[i] - exact[i]) * (a[i] - exact[i]), den += exact[i] * exact[i];
    return std::sqrt(num / den);
  };
  EXPECT_NE(with, without) << "the transform was not applied to a batch of " << b.num_rows() << " tokens";
  EXPECT_LT(rel(with), 0.5);
  EXPECT_LT(rel(without), 0.5);
}
