// range_timer with CUDA events (profiler.range_times on the GPU): a tiny ESM-2 trained on the GPU
// through TrainStep inside a profiler window; every range is timed on the compute stream, the
// layers' ranges lie inside their phase's, and the window's steps only are counted.
#include <gtest/gtest.h>

#include <map>

#include "biofm/core/profiling.h"
#include "biofm/core/range_timer.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/step.h"
#include "cuda_test_util.h"
#include "models/tiny_models.h"

using namespace biofm;

TEST(CudaRangeTimer, TimesEveryRangeOfTheWindowWithEvents) {
  BIOFM_REQUIRE_GPU();
  const ModelFamily& f = family_named("esm2");
  BuildOptions bo;
  bo.precision = Precision::Bf16Mixed;
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, 3), Device::CUDA, bo);
  SequenceDataset data = testkit::bundled_data(f);
  auto src = f.batches(testkit::small_batches(), data);
  AdamW opt(m->params(), AdamWConfig{});
  TrainStep step(*m, opt);
  range_timer::set_enabled(true, /*gpu=*/true);
  ProfilerWindow::configure(2, 3, 0);
  for (int s = 0; s < 4; ++s) step.run({src->next()}, 1e-3);
  ASSERT_TRUE(range_timer::pending());
  std::map<std::string, range_timer::Row> rows;
  for (const range_timer::Row& r : range_timer::take()) rows[r.name] = r;
  range_timer::set_enabled(false, false);
  for (const char* name : {"train_step", "forward", "backward", "optimizer", "layer 1 forward", "layer 3 backward"}) {
    ASSERT_TRUE(rows.count(name)) << name;
    EXPECT_GT(rows[name].total_ms, 0.0) << name;
  }
  EXPECT_EQ(rows["train_step"].calls, 2);
  EXPECT_EQ(rows["layer 2 backward"].calls, 2);
  double layers = 0;
  for (int l = 1; l <= 3; ++l) layers += rows["layer " + std::to_string(l) + " backward"].total_ms;
  EXPECT_LE(layers, rows["backward"].total_ms * 1.001 + 1e-3) << "the layers run inside backward's range";
  EXPECT_LE(rows["backward"].total_ms, rows["train_step"].total_ms);
}
