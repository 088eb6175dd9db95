// data/pack.h: how many samples a micro batch takes, from token counts only (what the
// batchers' skip() steps over on resume; their next() must take the same).
#include "biofm/data/pack.h"

#include <gtest/gtest.h>

#include <vector>

using namespace biofm;

namespace {
uint64_t take(BatchMode mode, int64_t max_tokens, int64_t micro, const std::vector<int64_t>& lens) {
  return samples_in_batch(mode, max_tokens, micro, [&](uint64_t k) { return lens.at(k); });
}
}  // namespace

TEST(SamplesInBatch, ThdPacksWholeSamplesUnderTheBudget) {
  const std::vector<int64_t> lens{4, 5, 3, 9, 2, 2, 2};
  EXPECT_EQ(take(BatchMode::Thd, 12, 1, lens), 3u);   // 4+5+3 = 12: stops at the budget exactly
  EXPECT_EQ(take(BatchMode::Thd, 11, 1, lens), 2u);   // 4+5 = 9; +3 would be 12 > 11
  EXPECT_EQ(take(BatchMode::Thd, 3, 1, lens), 1u);    // a sample over the budget still goes alone
}

TEST(SamplesInBatch, BshdTakesTheMicroBatch) {
  const std::vector<int64_t> lens{4, 5, 3};
  EXPECT_EQ(take(BatchMode::Bshd, 1, 2, lens), 2u);  // token counts do not matter
}
