// AdamW applied one layer ahead on the GPU (ops.adamw_ahead, AdamW::apply_ahead_in): each layer's
// part of a step's update runs on the side stream while the layer before it runs in the next
// step's forward. Trained for a few steps (with a validation pass in between), the parameters,
// the moments and the FP8 state equal those of the update applied whole, with either stream
// delayed. (tests/train/optimizer_ahead_test.cpp checks the bookkeeping on the CPU.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "biofm/core/cuda_context.h"
#include "biofm/core/side_stream.h"
#include "biofm/train/step.h"
#include "cuda_test_util.h"
#include "small_models.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

struct Case {
  const char* name;
  std::function<std::unique_ptr<LanguageModel>()> make;
  std::vector<Batch> micro;  // on the host, as TrainStep takes them
  Batch held_out;            // on the GPU
  int layers;
};

struct Trained {
  std::vector<Tensor> params, moments, quant;  // host F32
};

// Three steps of two micro batches and a validation pass after the second; ahead: the update
// applied one layer ahead; how: 0 as the side stream runs, 1 its work delayed, 2 the compute
// stream delayed after each scope's mark. fp8: 0 bf16, 2 DelayedScaling.
Trained train(const Case& c, bool ahead, int how, int fp8) {
  side_stream::set_delays_for_tests(how == 2 ? 2000 : 0, how == 1 ? 2000 : 0);
  std::unique_ptr<LanguageModel> m = c.make();
  m->params().init(5);
  if (fp8 == 2) {
    ops::LayerQuant lq;
    lq.format = ops::LayerFormat::Fp8;
    lq.scaling = ops::Fp8Scaling::Delayed;
    m->set_layer_quant(std::vector<ops::LayerQuant>(size_t(c.layers), lq));
  }
  AdamWConfig ac;
  ac.lr = 1e-3f;
  AdamW opt(m->params(), ac);
  if (ahead) opt.apply_ahead_in(*m);
  TrainStep step(*m, opt);
  for (int s = 0; s < 3; ++s) {
    step.run(c.micro, 1e-3);
    EXPECT_EQ(opt.update_owed(), ahead);
    if (s == 1) (void)m->evaluate(c.held_out, false);
  }
  m->settle_weights();
  EXPECT_FALSE(opt.update_owed());
  cuda_ctx::synchronize();
  side_stream::set_delays_for_tests(0, 0);
  Trained t;
  for (size_t i = 0; i < m->params().size(); ++i) t.params.push_back(to_host_f32(m->params().param(i)));
  for (const auto& [k, v] : opt.state()) t.moments.push_back(to_host_f32(v));
  for (const auto& [k, v] : m->quant_state()) t.quant.push_back(to_host_f32(v));
  return t;
}

// Each tensor of `got` against `ref`: exact where two runs of the update applied whole agree
// exactly, else within the run-to-run spread (cuDNN's attention backward and the embedding
// backward add with atomics; Adam carries their differences into every later step).
void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& ref, const std::vector<Tensor>& ref2,
                  const char* what, int* exact) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double noise = rel_error(ref2[i], ref[i]), d = rel_error(got[i], ref[i]);
    if (noise == 0.0) {
      ++*exact;
      EXPECT_EQ(d, 0.0) << what << " " << i << " differs";
    } else {
      EXPECT_LE(d, std::max(10 * noise, 1e-5)) << what << " " << i;
    }
  }
}

}  // namespace

TEST(CudaAdamWAhead, TrainsAsTheUpdateAppliedWhole) {
  BIOFM_REQUIRE_GPU();
  const Esm2Config ec = small_esm2_config();
  const LlamaConfig lc = small_llama_config();
  auto host = [](std::vector<Batch> v) {
    for (Batch& b : v) b = b.to(Device::CPU);
    return v;
  };
  const std::vector<Batch> e = protein_batches(3), l = dna_batches(3);
  const Case cases[] = {
      {"esm2", [&] { return std::make_unique<Esm2Model>(ec, Device::CUDA, Precision::Bf16Mixed); },
       host({e[0], e[1]}), e[2], 3},
      {"llama", [&] { return std::make_unique<LlamaModel>(lc, Device::CUDA, Precision::Bf16Mixed); },
       host({l[0], l[1]}), l[2], 3}};
  for (const Case& c : cases) {
    for (int fp8 : {0, 2}) {
      SCOPED_TRACE(std::string(c.name) + (fp8 ? " FP8 delayed" : " bf16"));
      const Trained whole = train(c, false, 0, fp8), whole2 = train(c, false, 0, fp8);
      int exact = 0;
      for (int how = 0; how < 3; ++how) {
        SCOPED_TRACE("side-stream mode " + std::to_string(how));
        const Trained ahead = train(c, true, how, fp8);
        expect_close(ahead.params, whole.params, whole2.params, "parameter", &exact);
        expect_close(ahead.moments, whole.moments, whole2.moments, "moment", &exact);
        expect_close(ahead.quant, whole.quant, whole2.quant, "FP8 state", &exact);
      }
      std::printf("[adamw ahead] %s fp8=%d: %d of %zu tensors exact run to run (and ahead)\n", c.name, fp8, exact / 3,
                  whole.params.size() + whole.moments.size() + whole.quant.size());
    }
  }
}
