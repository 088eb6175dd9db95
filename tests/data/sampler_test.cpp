// The per-index sample order: a bijection for every size, deterministic, different across
// epochs and seeds, shuffled well enough, and O(1) in memory for huge datasets.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "biofm/data/sampler.h"

using namespace biofm;

TEST(DataSampler, PermutesEverySizeExactly) {
  for (uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 17ull, 64ull, 1000ull, 4097ull, 65537ull}) {
    std::vector<uint32_t> p = epoch_permutation(n, 9, 2);
    std::vector<uint32_t> s = p;
    std::sort(s.begin(), s.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(s[i], i) << "n " << n;
  }
}

TEST(DataSampler, KeyedBySeedAndEpoch) {
  EXPECT_EQ(epoch_permutation(1000, 5, 0), epoch_permutation(1000, 5, 0));
  EXPECT_NE(epoch_permutation(1000, 5, 0), epoch_permutation(1000, 5, 1));
  EXPECT_NE(epoch_permutation(1000, 5, 0), epoch_permutation(1000, 6, 0));
}

// A shuffle, not a near-identity: few fixed points, positions spread over the range, and
// neighbours land far apart.
TEST(DataSampler, ShufflesWell) {
  const uint64_t n = 100000;
  std::vector<uint32_t> p = epoch_permutation(n, 42, 0);
  uint64_t fixed = 0;
  double mean_jump = 0, mean_pos_first_half = 0;
  for (uint64_t i = 0; i < n; ++i) {
    fixed += p[i] == i;
    if (i + 1 < n) mean_jump += std::fabs(double(p[i + 1]) - double(p[i]));
    if (i < n / 2) mean_pos_first_half += p[i];
  }
  mean_jump /= double(n - 1);
  mean_pos_first_half /= double(n / 2);
  EXPECT_LT(fixed, 10u);  // a random permutation has ~1
  EXPECT_NEAR(mean_jump, double(n) / 3, double(n) * 0.02);  // E|U - V| = n/3 for independent uniforms
  EXPECT_NEAR(mean_pos_first_half, double(n) / 2, double(n) * 0.01);
}

TEST(DataSampler, HugeDatasetsNeedNoTable) {
  const uint64_t n = 1000000000000ull;  // 10^12 samples
  SampleOrder order(n, 3, true);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t a = order(5 * n + 123456789), b = order(5 * n + 123456790);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(a, n);
  EXPECT_LT(b, n);
  EXPECT_NE(a, b);
  EXPECT_EQ(order(5 * n + 123456789), a);
  EXPECT_LT(ms, 100.0) << "two lookups, no table";
  SampleOrder plain(n, 3, false);
  EXPECT_EQ(plain(2 * n + 7), 7u);
}
