// GradientSync against a recording communicator (one process, no network): every rank must issue
// the same collectives in the same order with the same sizes — also a rank whose last micro
// batch had no labels and so ran no backward — and together they must cover every gradient once.
// The sharded optimizer's shards tile the flat buffer.
#include <gtest/gtest.h>

#include <algorithm>

#include "train/recording_comm.h"
#include "biofm/train/data_parallel.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/step.h"
#include "models/tiny_models.h"

using namespace biofm;
using biofm::testkit::RecordingComm;

namespace {

std::vector<RecordingComm::Call> step_calls(ParallelStrategy s, bool last_micro_has_labels, int64_t bucket_bytes) {
  const ModelFamily& f = family_named("esm2");
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, 4), Device::CPU, BuildOptions{});
  SequenceDataset data = testkit::bundled_data(f);
  auto src = f.batches(testkit::small_batches(), data);
  std::vector<Batch> micro{src->next(), src->next()};
  if (!last_micro_has_labels) micro.back().num_label_tokens = 0;  // TrainStep skips it: no backward, no hooks
  RecordingComm comm(0, 2);
  DataParallelOptions o;
  o.strategy = s;
  o.bucket_bytes = bucket_bytes;
  GradientSync sync(comm, *m, o);
  AdamW opt(m->params(), AdamWConfig{}, optimizer_sharded(s) ? &comm : nullptr);
  TrainStep step(*m, opt, &sync);
  step.run(micro, 1e-3);
  return comm.calls;
}

}  // namespace

TEST(GradientSync, EveryRankIssuesTheSameCollectivesEvenWithoutABackward) {
  for (ParallelStrategy s : {ParallelStrategy::Ddp, ParallelStrategy::Zero1}) {
    for (int64_t bucket : {int64_t(1), int64_t(25) << 20}) {
      const auto with = step_calls(s, true, bucket), without = step_calls(s, false, bucket);
      EXPECT_EQ(with, without) << strategy_name(s) << ", bucket " << bucket;
      EXPECT_GT(with.size(), 2u);
    }
  }
}

TEST(GradientSync, TheReductionsCoverEveryGradientOnce) {
  const ModelFamily& f = family_named("esm2");
  const int64_t numel = f.build(testkit::tiny_shape(f, 4), Device::CPU, BuildOptions{})->params().numel();
  for (int64_t bucket : {int64_t(1), int64_t(4) << 10, int64_t(25) << 20}) {
    int64_t reduced = 0;
    int scalar_reductions = 0;
    for (const auto& c : step_calls(ParallelStrategy::Ddp, true, bucket)) {
      if (c.numel == 2) ++scalar_reductions;  // loss sum and label count
      else reduced += c.numel;
    }
    EXPECT_EQ(reduced, numel) << "bucket " << bucket;
    EXPECT_EQ(scalar_reductions, 1);
  }
}

TEST(GradientSync, RefusesTheStrategiesThatShardGradients) {
  const ModelFamily& f = family_named("esm2");
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, 2), Device::CPU, BuildOptions{});
  RecordingComm comm(0, 2);
  for (ParallelStrategy s : {ParallelStrategy::Zero2, ParallelStrategy::Fsdp}) {
    DataParallelOptions o;
    o.strategy = s;
    EXPECT_THROW(GradientSync(comm, *m, o), Error) << strategy_name(s);
  }
}

TEST(ShardedAdamW, ShardsTileTheFlatBuffer) {
  for (int64_t numel : {int64_t(1), int64_t(7), int64_t(1000), int64_t(1001)})
    for (int world : {1, 2, 3, 8}) {
      int64_t at = 0;
      for (int r = 0; r < world; ++r) {
        const auto [b, e] = AdamW::shard_of(numel, r, world);
        EXPECT_EQ(b, at);
        EXPECT_LE(b, e);
        at = e;
      }
      EXPECT_EQ(at, numel) << numel << " over " << world;
    }
}
