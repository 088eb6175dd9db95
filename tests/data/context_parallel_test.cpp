// data/context_parallel.h: a context-parallel group's shares of a batch. Together they hold
// every token of the group's batch exactly once, each where the gather puts it back, with the
// positions of the whole sequence; every rank holds as many rows as the others and, for causal
// attention, as many query-key pairs when the lengths divide; ESM-2's token-dropout factors are
// those of the whole sequences (as the op computes them on the unsplit batch).
#include "biofm/data/context_parallel.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "biofm/data/pack.h"
#include "biofm/ops/embedding/op.h"

using namespace biofm;

namespace {

constexpr int32_t kPad = 1, kMask = 32;

// Sequences of the given lengths; ids 4 + (s·7 + i) % 20, some masked; labels on every third.
Batch group_batch(const std::vector<int64_t>& lens, BatchMode mode, int64_t pad_to = 1) {
  BatchBuilder bb;
  for (size_t s = 0; s < lens.size(); ++s) {
    std::vector<int32_t> ids, labels;
    for (int64_t i = 0; i < lens[s]; ++i) {
      const bool masked = (s + size_t(i)) % 5 == 0;
      ids.push_back(masked ? kMask : int32_t(4 + (s * 7 + size_t(i)) % 20));
      labels.push_back(i % 3 == 0 ? int32_t(4 + i % 20) : kIgnoreLabel);
    }
    bb.add(ids.data(), labels.data(), lens[s]);
  }
  return bb.build(mode, pad_to, kPad);
}

// The sequence whose slot holds global row gr.
int64_t sequence_of(const int32_t* global_cu, int64_t gr) {
  int64_t s = 0;
  while (global_cu[s + 1] <= gr) ++s;
  return s;
}

struct Case {
  std::vector<int64_t> lens;
  BatchMode mode;
  int64_t pad_to;
};

const std::vector<Case> kCases = {
    {{1, 5, 8, 13}, BatchMode::Thd, 1},
    {{7}, BatchMode::Thd, 1},
    {{2, 3, 30, 4}, BatchMode::Thd, 8},  // padding rows after the last sequence
    {{6, 11, 3}, BatchMode::Bshd, 1},    // padded slots
    {{16, 16}, BatchMode::Thd, 1},       // full windows: the group's layout is uniform
};

}  // namespace

TEST(ContextParallelShare, SharesHoldEveryTokenOnceWhereTheGatherPutsItBack) {
  for (const Case& c : kCases)
    for (int C : {1, 2, 3}) {
      SCOPED_TRACE("C=" + std::to_string(C) + " first length " + std::to_string(c.lens[0]));
      const Batch g = group_batch(c.lens, c.mode, c.pad_to);
      std::vector<Batch> shares;
      for (int r = 0; r < C; ++r) shares.push_back(context_parallel_share(g, r, C, kPad, kMask));
      const ContextParallelShard& s0 = *shares[0].cp;
      const int64_t T = shares[0].num_rows(), G = s0.global_rows, B = g.num_sequences();
      ASSERT_EQ(G, C * T);
      const int32_t* gcu = s0.global_cu_seqlens.i32();
      const int32_t* glen = s0.global_seq_lens.i32();
      int64_t labels = 0;
      std::map<int64_t, int> seen;  // global row -> times held
      for (int r = 0; r < C; ++r) {
        const Batch& b = shares[size_t(r)];
        ASSERT_EQ(b.num_rows(), T) << "every rank holds as many rows";
        ASSERT_EQ(b.cp->gathered_to_global.numel(), G);
        labels += b.num_label_tokens;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t gr = b.cp->local_to_global.i32()[t];
          ++seen[gr];
          EXPECT_EQ(s0.gathered_to_global.i32()[gr], r * T + t) << "the gather puts row " << t << " of rank " << r << " back";
          // Which sequence, and where in it
          const int64_t s = sequence_of(gcu, gr);
          const int64_t j = gr - gcu[s];
          if (j < glen[s]) {
            const int64_t src = g.cu_seqlens.i32()[s] + j;
            EXPECT_EQ(b.input_ids.i32()[t], g.input_ids.i32()[src]);
            EXPECT_EQ(b.labels.i32()[t], g.labels.i32()[src]);
            EXPECT_EQ(b.positions.i32()[t], j) << "positions of the whole sequence";
          } else {
            EXPECT_EQ(b.input_ids.i32()[t], kPad);
            EXPECT_EQ(b.labels.i32()[t], kIgnoreLabel);
          }
        }
        // The share is a valid batch: each sequence's real rows come first in its slot.
        for (int64_t s = 0; s < B; ++s) {
          const int32_t start = b.cu_seqlens.i32()[s], n = b.seq_lens.i32()[s];
          for (int32_t i = start; i < b.cu_seqlens.i32()[s + 1]; ++i) {
            const int64_t j = b.cp->local_to_global.i32()[i] - gcu[s];
            EXPECT_EQ(j < glen[s], i < start + n) << "sequence " << s << " row " << i;
          }
        }
      }
      EXPECT_EQ(int64_t(seen.size()), G);
      for (const auto& [row, n] : seen) EXPECT_EQ(n, 1) << "global row " << row;
      EXPECT_EQ(labels, g.num_label_tokens);
      for (int64_t s = 0; s < B; ++s) {
        EXPECT_EQ(glen[s], g.seq_lens.i32()[s]);
        EXPECT_EQ((gcu[s + 1] - gcu[s]) % (2 * C), 0) << "slots of a multiple of 2C rows";
        EXPECT_LT(gcu[s + 1] - gcu[s] - glen[s], 2 * C);
      }
      const bool full_windows = c.lens == std::vector<int64_t>{16, 16} && 16 % (2 * C) == 0;
      EXPECT_EQ(s0.global_uniform, full_windows);
    }
}

TEST(ContextParallelShare, CausalWorkIsBalancedWhenLengthsDivide) {
  // Query row at position p sees p + 1 keys; chunks r and 2C-1-r together see the same number.
  const Batch g = group_batch({16, 32, 8}, BatchMode::Thd);
  for (int C : {2, 4}) {
    std::vector<int64_t> pairs;
    for (int r = 0; r < C; ++r) {
      const Batch b = context_parallel_share(g, r, C, kPad, kMask);
      int64_t n = 0;
      for (int64_t t = 0; t < b.num_rows(); ++t) n += b.positions.i32()[t] + 1;
      pairs.push_back(n);
    }
    for (int r = 1; r < C; ++r) EXPECT_EQ(pairs[size_t(r)], pairs[0]) << "C=" << C << " rank " << r;
  }
}

TEST(ContextParallelShare, TokenDropoutFactorsAreThoseOfWholeSequences) {
  for (const Case& c : kCases) {
    const Batch g = group_batch(c.lens, c.mode, c.pad_to);
    // The op on the whole batch: one embedding row of ones per token gives each row's factor.
    Tensor h = Tensor::empty({g.num_rows(), 1}, DType::F32), scale = Tensor::empty({g.num_rows()}, DType::F32);
    for (int64_t i = 0; i < g.num_rows(); ++i) h.f32()[i] = 1.0f;
    ops::esm_token_dropout_forward(h, scale, g.input_ids, g.cu_seqlens, g.seq_lens, kMask);
    for (int C : {2, 3}) {
      const Batch b0 = context_parallel_share(g, 0, C, kPad, kMask);
      const int32_t* gcu = b0.cp->global_cu_seqlens.i32();
      for (int r = 0; r < C; ++r) {
        const Batch b = context_parallel_share(g, r, C, kPad, kMask);
        for (int64_t t = 0; t < b.num_rows(); ++t) {
          const int64_t gr = b.cp->local_to_global.i32()[t];
          const int64_t s = sequence_of(gcu, gr);
          const int64_t j = gr - gcu[s];
          const float want = j < g.seq_lens.i32()[s] ? scale.f32()[g.cu_seqlens.i32()[s] + j] : 0.0f;
          EXPECT_EQ(b.cp->token_dropout_scale.f32()[t], want) << "C=" << C << " rank " << r << " row " << t;
        }
      }
    }
    // Without token dropout (mask -1): real rows 1, padding 0, as the op with mask_id < 0.
    const Batch b = context_parallel_share(g, 1, 2, kPad, -1);
    const int32_t* gcu = b.cp->global_cu_seqlens.i32();
    for (int64_t t = 0; t < b.num_rows(); ++t) {
      const int64_t gr = b.cp->local_to_global.i32()[t];
      const int64_t s = sequence_of(gcu, gr);
      EXPECT_EQ(b.cp->token_dropout_scale.f32()[t], gr - gcu[s] < g.seq_lens.i32()[s] ? 1.0f : 0.0f);
    }
  }
}

TEST(ContextParallelShare, BadGroupsAreRefused) {
  const Batch g = group_batch({4}, BatchMode::Thd);
  EXPECT_THROW(context_parallel_share(g, 2, 2, kPad, kMask), std::exception);
  EXPECT_THROW(context_parallel_share(g, 0, 0, kPad, kMask), std::exception);
}
