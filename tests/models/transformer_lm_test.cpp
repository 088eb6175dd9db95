// TransformerLM's layer hook: forward announces each layer before and after it runs, backward
// before each layer and once its gradients are final (GradsReady, last layer first); when
// GradsReady fires, that layer's gradients equal the gradients after the whole backward; the
// layers' flat ranges tile their parameters.
#include <gtest/gtest.h>

#include "biofm/data/dataset.h"
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
