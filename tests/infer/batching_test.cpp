// infer/batching: packing under a token budget, longest first; windows that give every base
// to exactly one window.
#include "biofm/infer/batching.h"

#include "biofm/data/pack.h"

#include <gtest/gtest.h>

#include <set>

using namespace biofm;
using namespace biofm::infer;

TEST(InferBatching, EveryItemOnceUnderTheBudgetLongestFirst) {
  const std::vector<int64_t> lengths = {5, 40, 12, 40, 7, 100, 3, 64, 64, 1};
  const int64_t budget = 64;
  const auto plan = plan_batches(lengths, budget);
  std::multiset<int64_t> seen;
  int64_t prev_len = INT64_MAX;
  for (const auto& batch : plan) {
    ASSERT_FALSE(batch.empty());
    int64_t tokens = 0;
    for (int64_t i : batch) {
      seen.insert(i);
      tokens += lengths[size_t(i)];
      EXPECT_LE(lengths[size_t(i)], prev_len) << "items must come longest first";
      prev_len = lengths[size_t(i)];
    }
    // Over budget only when a single item is longer than the budget by itself.
    if (tokens > budget) EXPECT_EQ(batch.size(), 1u);
  }
  EXPECT_EQ(seen.size(), lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) EXPECT_EQ(seen.count(int64_t(i)), 1u) << i;
  EXPECT_EQ(plan[0], std::vector<int64_t>{5});  // 100 > 64: alone
  EXPECT_EQ(plan_batches({}, 10).size(), 0u);
}

TEST(InferBatching, PlannedShapesAreThoseOfTheBuiltBatches) {
  // batch_shapes announces each batch before it is built (LanguageModel::prepare_forward); it must
  // say what BatchBuilder then builds, uniform batches (every sequence one length) included.
  const std::vector<int64_t> lengths = {5, 40, 12, 40, 7, 100, 3, 64, 64, 1, 32, 32};
  bool saw_uniform = false, saw_ragged = false;
  for (int64_t budget : {int64_t(64), int64_t(128), int64_t(1000)}) {
    const auto plan = plan_batches(lengths, budget);
    const std::vector<BatchShape> shapes = batch_shapes(plan, lengths);
    ASSERT_EQ(shapes.size(), plan.size());
    for (size_t k = 0; k < plan.size(); ++k) {
      BatchBuilder builder;
      for (int64_t i : plan[k]) {
        const std::vector<int32_t> ids(size_t(lengths[size_t(i)]), 5), labels(ids.size(), -100);
        builder.add(ids.data(), labels.data(), int64_t(ids.size()));
      }
      const BatchShape built = builder.build(BatchMode::Thd, 1, 0).shape();
      EXPECT_EQ(shapes[k].sequences, built.sequences) << "batch " << k;
      EXPECT_EQ(shapes[k].rows, built.rows) << "batch " << k;
      EXPECT_EQ(shapes[k].max_seqlen, built.max_seqlen) << "batch " << k;
      EXPECT_EQ(shapes[k].uniform, built.uniform) << "batch " << k;
      (built.uniform ? saw_uniform : saw_ragged) = true;
    }
  }
  EXPECT_TRUE(saw_uniform && saw_ragged) << "the plans should hold both kinds";
}

TEST(InferBatching, KeptWindowsPartitionTheSequence) {
  for (bool causal : {false, true})
    for (uint64_t len : {1u, 7u, 8u, 9u, 30u, 101u})
      for (int64_t stride : {0, 1, 3}) {
        SCOPED_TRACE(std::to_string(len) + " causal " + std::to_string(causal) + " stride " + std::to_string(stride));
        const auto ws = kept_windows(len, /*window_tokens=*/10, stride, causal);
        uint64_t next = 0;
        for (size_t j = 0; j < ws.size(); ++j) {
          EXPECT_LE(ws[j].length, 8u);
          EXPECT_EQ(ws[j].keep_begin, next) << "kept ranges must tile the sequence";
          EXPECT_GE(ws[j].keep_begin, ws[j].start);
          EXPECT_LE(ws[j].keep_end, ws[j].start + ws[j].length);
          EXPECT_LT(ws[j].keep_begin, ws[j].keep_end);
          next = ws[j].keep_end;
        }
        EXPECT_EQ(next, len);
      }
  // 30 bases, 8 per window, overlap 3: windows start at 0, 5, 10, ...; the overlap [5, 8)
  // goes to the first window (causal) or is split at its middle (bidirectional).
  const auto c = kept_windows(30, 10, 3, true), b = kept_windows(30, 10, 3, false);
  EXPECT_EQ(c[1].start, 5u);
  EXPECT_EQ(c[0].keep_end, 8u);
  EXPECT_EQ(b[0].keep_end, 7u);
  EXPECT_EQ(b[1].keep_begin, 7u);
}
