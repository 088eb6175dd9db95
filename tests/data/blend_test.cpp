// Blends (data/blend.h): realised proportions, determinism, repetition of small sources.
#include "biofm/data/blend.h"

#include <gtest/gtest.h>

#include <map>

#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/data/sampler.h"
#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

// A dataset of n sequences whose first residue names the source (A, C, ...), then its index.
std::unique_ptr<SequenceCorpus> source(char tag, int n) {
  std::vector<std::string> seqs;
  for (int i = 0; i < n; ++i) seqs.push_back(std::string(1, tag) + "K" + std::to_string(i));
  return std::make_unique<SequenceDataset>(SequenceDataset::from_sequences(seqs));
}

BlendCorpus blend(std::vector<double> w, std::vector<int> sizes, uint64_t seed = 7) {
  std::vector<std::unique_ptr<SequenceCorpus>> s;
  std::vector<std::string> names;
  const char tags[] = {'A', 'C', 'D', 'E'};
  for (size_t i = 0; i < sizes.size(); ++i) {
    s.push_back(source(tags[i], sizes[i]));
    names.push_back(std::string(1, tags[i]));
  }
  return BlendCorpus(std::move(s), std::move(w), std::move(names), seed);
}

}  // namespace

TEST(DataBlend, SlotsFollowTheWeights) {
  // 1000 + 150 + 50 records weighted 1 : 2 : 1 → 300, 600 and 300 slots of 1200: source A gives
  // 300 distinct records, C each of its records 4 times, D each 6 times.
  const BlendCorpus b = blend({1, 2, 1}, {1000, 150, 50});
  ASSERT_EQ(b.size(), 1200u);
  EXPECT_EQ(b.slots(0), 300u);
  EXPECT_EQ(b.slots(1), 600u);
  EXPECT_EQ(b.slots(2), 300u);
  std::map<std::pair<size_t, uint64_t>, int> uses;
  for (uint64_t i = 0; i < b.size(); ++i) uses[b.locate(i)] += 1;
  int distinct[3] = {0, 0, 0};
  for (auto [key, n] : uses) {
    distinct[key.first] += 1;
    EXPECT_EQ(n, key.first == 0 ? 1 : key.first == 1 ? 4 : 6);
  }
  EXPECT_EQ(distinct[0], 300);
  EXPECT_EQ(distinct[1], 150);
  EXPECT_EQ(distinct[2], 50);
  // Lengths and tokens come from the located record.
  std::vector<int32_t> ids;
  b.append_tokens(700, 0, b.length(700), esm_tokenizer(), ids);
  EXPECT_EQ(ids[0], esm_tokenizer().encode("C")[1]);  // slot 700 is in C's range [300, 900)
}

TEST(DataBlend, StreamProportionsAndDeterminism) {
  const BlendCorpus b = blend({0.7, 0.3}, {5000, 300});
  const EsmTokenizer& tok = esm_tokenizer();
  const int32_t a_id = tok.encode("A")[1];
  // Over the shuffled training stream (sampler.h), every window of the stream holds the
  // sources in proportion: count the first residue of each sample over 3 stretches.
  SampleOrder order(b.size(), 42, true);
  for (uint64_t start : {uint64_t(0), uint64_t(1000), uint64_t(b.size() * 2 + 17)}) {
    int from_a = 0;
    const int n = 2000;
    std::vector<int32_t> ids;
    for (uint64_t k = start; k < start + n; ++k) {
      ids.clear();
      b.append_tokens(order(k), 0, 1, tok, ids);
      from_a += ids[0] == a_id;
    }
    EXPECT_NEAR(from_a / double(n), 0.7, 0.035) << "stretch at " << start;  // binomial sd 0.010
  }
  // The small source is repeated ~ 0.3 * 5300 / 300 = 5.3 times per epoch, each of its records
  // 5 or 6 times; the large one gives a subset of distinct records.
  std::map<uint64_t, int> seen_c;
  std::map<uint64_t, int> seen_a;
  for (uint64_t i = 0; i < b.size(); ++i) {
    auto [s, r] = b.locate(i);
    (s == 0 ? seen_a : seen_c)[r] += 1;
  }
  EXPECT_EQ(seen_c.size(), 300u);
  for (auto [r, n] : seen_c) EXPECT_TRUE(n == 5 || n == 6) << r << " seen " << n;
  EXPECT_EQ(seen_a.size(), b.slots(0));
  for (auto [r, n] : seen_a) EXPECT_EQ(n, 1);
  // A pure function of the seed.
  const BlendCorpus again = blend({0.7, 0.3}, {5000, 300});
  const BlendCorpus other = blend({0.7, 0.3}, {5000, 300}, 8);
  int differ = 0;
  for (uint64_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b.locate(i), again.locate(i));
    differ += b.locate(i) != other.locate(i);
  }
  EXPECT_GT(differ, 1000);
}

TEST(DataBlend, ZeroWeightDropsASourceAndBadWeightsFail) {
  const BlendCorpus b = blend({1, 0}, {100, 100});
  EXPECT_EQ(b.size(), 200u);
  for (uint64_t i = 0; i < b.size(); ++i) EXPECT_EQ(b.locate(i).first, 0u);
  EXPECT_TRUE(contains(error_of([] { blend({0, 0}, {10, 10}); }), "weights are all 0"));
  EXPECT_TRUE(contains(error_of([] { blend({1, -1}, {10, 10}); }), "weight -1 of C"));
  EXPECT_TRUE(contains(b.summary(), "blend of 2 sources, 200 samples per epoch")) << b.summary();
}

TEST(DataBlend, MlmBatchesOverABlendAreDeterministic) {
  const BlendCorpus b = blend({1, 1}, {40, 10});
  MlmOptions o;
  o.max_seq_length = 16;
  o.max_tokens_per_batch = 64;
  MlmBatcher x(b, o), y(b, o);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(same_batch(x.next(), y.next()));
}
