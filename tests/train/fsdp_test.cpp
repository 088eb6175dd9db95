// FsdpSync against a recording communicator (one process playing rank 0 of 2), for fsdp and
// zero2: the store keeps only this rank's shard (zero2: of the gradients; the weights stay whole);
// a step issues the same collectives whether or not a micro batch has a backward (the rank
// without labels replays them), every layer is gathered before it runs (fsdp; zero2 gathers
// nothing) and every gradient element is reduced to its owner exactly once per micro batch.
// (Two real ranks training as one are checked end to end in tests/e2e/distributed_test.cpp.)
#include <gtest/gtest.h>

#include "biofm/train/fsdp.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/step.h"
#include "models/tiny_models.h"
#include "train/recording_comm.h"

using namespace biofm;
using biofm::testkit::RecordingComm;

namespace {

struct StepRecord {
  std::vector<RecordingComm::Call> calls;
  int64_t numel = 0, held = 0, grads_held = 0;
  std::string events;
};

StepRecord fsdp_step(bool last_micro_has_labels, int layers, ParallelStrategy strategy = ParallelStrategy::Fsdp) {
  const ModelFamily& f = family_named("llama");
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, layers), Device::CPU, BuildOptions{});
  SequenceDataset data = testkit::bundled_data(f);
  auto src = f.batches(testkit::small_batches(), data);
  std::vector<Batch> micro{src->next(), src->next()};
  if (!last_micro_has_labels) micro.back().num_label_tokens = 0;
  RecordingComm comm(0, 2);
  AdamW opt(m->params(), AdamWConfig{}, &comm);
  FsdpSync sync(comm, *m, strategy);
  StepRecord rec;
  rec.numel = m->params().numel();
  rec.held = m->params().flat().numel();
  rec.grads_held = m->params().grad_flat().numel();
  TrainStep step(*m, opt, &sync);
  step.run(micro, 1e-3);
  rec.calls = comm.calls;
  return rec;
}

}  // namespace

TEST(Fsdp, TheStoreKeepsOnlyThisRanksShard) {
  const StepRecord r = fsdp_step(true, 3);
  const auto [b, e] = AdamW::shard_of(r.numel, 0, 2);
  EXPECT_EQ(r.held, e - b);
  EXPECT_LT(r.held, r.numel);
}

TEST(Fsdp, Zero2KeepsTheWeightsWholeAndOnlyThisRanksGradientShard) {
  const StepRecord r = fsdp_step(true, 3, ParallelStrategy::Zero2);
  const auto [b, e] = AdamW::shard_of(r.numel, 0, 2);
  EXPECT_EQ(r.held, r.numel);
  EXPECT_EQ(r.grads_held, e - b);
  EXPECT_LT(r.grads_held, r.numel);
  // No layer gathers: what is broadcast is the optimizer's updated shards, every element once.
  int64_t broadcast = 0;
  for (const auto& c : r.calls)
    if (c.op == "broadcast") broadcast += c.numel;
  EXPECT_EQ(broadcast, r.numel);
}

// The trainer builds zero2's store with its gradient shard only (the whole buffer never exists);
// FsdpSync takes it as it is, and one built for another rank is refused.
TEST(Fsdp, Zero2TakesAStoreBuiltWithItsGradientShard) {
  const ModelFamily& f = family_named("llama");
  BuildOptions o;
  o.shard = ParamShard{0, 2, /*gradients_only=*/true};
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, 2), Device::CPU, o);
  const int64_t numel = m->params().numel();
  const auto [b, e] = AdamW::shard_of(numel, 0, 2);
  EXPECT_FALSE(m->params().sharded());
  EXPECT_EQ(m->params().flat().numel(), numel);
  EXPECT_EQ(m->params().grad_flat().numel(), e - b);
  RecordingComm comm(0, 2);
  EXPECT_NO_THROW(FsdpSync(comm, *m, ParallelStrategy::Zero2));
  RecordingComm other(1, 2);
  EXPECT_THROW(FsdpSync(other, *m, ParallelStrategy::Zero2), Error);
}

TEST(Fsdp, EveryRankIssuesTheSameCollectivesEvenWithoutABackward) {
  for (ParallelStrategy s : {ParallelStrategy::Fsdp, ParallelStrategy::Zero2})
    for (int layers : {1, 2, 5}) {
      const StepRecord with = fsdp_step(true, layers, s), without = fsdp_step(false, layers, s);
      EXPECT_EQ(with.calls, without.calls) << layers << " layers";
      // (fsdp: a gather and a reduction per layer at least; zero2: a reduction)
      EXPECT_GT(with.calls.size(), size_t(s == ParallelStrategy::Fsdp ? 2 * layers : layers));
    }
}

TEST(Fsdp, EachMicroBatchReducesEveryLayerGradientOnce) {
  const ModelFamily& f = family_named("llama");
  const int layers = 4;
  std::unique_ptr<LanguageModel> m = f.build(testkit::tiny_shape(f, layers), Device::CPU, BuildOptions{});
  int64_t in_layers = 0;
  for (int l = 0; l < layers; ++l) in_layers += m->layer_param_range(l).second - m->layer_param_range(l).first;
  for (ParallelStrategy s : {ParallelStrategy::Fsdp, ParallelStrategy::Zero2}) {
    const StepRecord r = fsdp_step(true, layers, s);
    int64_t reduced = 0, scalars = 0;
    for (const auto& c : r.calls) {
      if (c.op == "reduce") reduced += c.numel;
      if (c.op == "all_reduce" && c.numel == 2) ++scalars;
    }
    // Two micro batches reduce the layers twice; the rest (embedding, norm, head) once, at the end.
    EXPECT_EQ(reduced, 2 * in_layers + (r.numel - in_layers));
    EXPECT_EQ(scalars, 2);  // the loss sum and label count; the optimizer's per-shard norms (2 ranks)
  }
}
