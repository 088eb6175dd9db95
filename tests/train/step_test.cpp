// TrainStep: the loss of a step with several micro batches is the mean over all their label
// tokens (checked against evaluate(), a separate no-gradient path), and micro batches without
// labels are harmless.
#include <gtest/gtest.h>

#include <cmath>

#include "biofm/data/dataset.h"
#include "models/tiny_models.h"
#include "biofm/train/step.h"

using namespace biofm;

TEST(TrainStep, LossIsTheMeanOverAllMicroBatchesLabelTokens) {
  const ModelFamily& f = family_named("esm2");
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f), Device::CPU, BuildOptions{});
  SequenceDataset data = testkit::bundled_data(f);
  DataOptions d = testkit::small_batches();
  d.max_tokens_per_batch = 200;
  auto src = f.batches(d, data);
  std::vector<Batch> micro{src->next(), src->next(), src->next()};
  double sum = 0;
  int64_t n = 0;
  for (const Batch& b : micro) {
    LossSums s = m->evaluate(b, false);
    sum += s.loss_sum;
    n += s.num_tokens;
  }
  AdamW opt(m->params(), AdamWConfig{});
  TrainStep step(*m, opt);
  int before_optimizer = 0;
  step.before_optimizer = [&] { ++before_optimizer; };
  step.run(micro, 1e-3);
  EXPECT_EQ(step.label_tokens(), n);
  EXPECT_NEAR(step.read_mean_loss(), sum / double(n), 1e-5 * sum / double(n));
  EXPECT_EQ(before_optimizer, 1);
  EXPECT_EQ(opt.steps_taken(), 1);
}
