// ESM-2 MLM batching: masking, determinism, packing, padding, truncation, eval.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/data/sampler.h"
#include "data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

const SequenceDataset& proteins() {
  static SequenceDataset ds = SequenceDataset::load(source_path("data/proteins_sample.fasta"));
  return ds;
}

MlmOptions thd_options() {
  MlmOptions o;
  o.seed = 7;
  o.max_seq_length = 512;
  o.max_tokens_per_batch = 4096;
  return o;
}

}  // namespace

TEST(DataSampler, PermutationIsDeterministicPerEpoch) {
  auto p0 = epoch_permutation(1000, 5, 0);
  auto p0b = epoch_permutation(1000, 5, 0);
  auto p1 = epoch_permutation(1000, 5, 1);
  auto q0 = epoch_permutation(1000, 6, 0);
  EXPECT_EQ(p0, p0b);
  EXPECT_NE(p0, p1);
  EXPECT_NE(p0, q0);
  auto sorted = p1;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  SampleOrder order(1000, 5, true);
  EXPECT_EQ(order(1000 + 17), p1[17]);  // epoch 1, slot 17
  EXPECT_EQ(order(3), p0[3]);
  SampleOrder plain(1000, 5, false);
  EXPECT_EQ(plain(2345), 345u);
}

TEST(DataMlm, MaskingStatisticsAndLabels) {
  // One pass over the bundled sample in file order: ~735k residues.
  const SequenceDataset& ds = proteins();
  MlmOptions o = thd_options();
  o.shuffle = false;
  o.max_seq_length = 1024;
  o.max_tokens_per_batch = 16384;
  MlmBatcher mlm(ds, o);
  EsmTokenizer tok;
  uint64_t residues = 0, selected = 0, masked = 0, randomized = 0, kept = 0;
  std::vector<uint64_t> random_ids(33, 0);
  uint64_t k = 0;
  while (mlm.cursor() < ds.size()) {
    Batch b = mlm.next();
    check_batch_layout(b, EsmTokenizer::kPad);
    auto ids = to_vec(b.input_ids), labels = to_vec(b.labels), cu = to_vec(b.cu_seqlens), lens = to_vec(b.seq_lens);
    for (size_t s = 0; s < lens.size(); ++s, ++k) {
      std::vector<int32_t> orig = tok.encode(ds.sequence(k % ds.size()));
      ASSERT_EQ(int32_t(orig.size()), lens[s]);  // no sample is longer than 1022 residues
      for (int32_t t = 0; t < lens[s]; ++t) {
        int32_t id = ids[size_t(cu[s] + t)], lab = labels[size_t(cu[s] + t)];
        if (esm_tokenizer().is_special(orig[size_t(t)])) {
          EXPECT_EQ(lab, -100);
          EXPECT_EQ(id, orig[size_t(t)]);
          continue;
        }
        ++residues;
        if (lab == -100) {
          EXPECT_EQ(id, orig[size_t(t)]);
          continue;
        }
        EXPECT_EQ(lab, orig[size_t(t)]);
        ++selected;
        if (id == EsmTokenizer::kMask) {
          ++masked;
        } else if (id != lab) {
          ++randomized;
          ++random_ids[size_t(id)];
        } else {
          ++kept;
        }
      }
    }
  }
  EXPECT_GE(k, ds.size());
  EXPECT_EQ(mlm.stats().label_tokens, selected);
  double p_sel = double(selected) / double(residues);
  EXPECT_NEAR(p_sel, 0.15, 0.003) << selected << " of " << residues;
  // A random draw can hit <mask> or the original id (1/33 each).
  EXPECT_NEAR(double(masked) / double(selected), 0.8 + 0.1 / 33, 0.006);
  EXPECT_NEAR(double(randomized) / double(selected), 0.1 * 31 / 33, 0.005);
  EXPECT_NEAR(double(kept) / double(selected), 0.1 + 0.1 / 33, 0.005);
  // Random ids come from the whole vocabulary, specials included, as HF does.
  for (int id = 0; id < 33; ++id)
    if (id != EsmTokenizer::kMask) EXPECT_GT(random_ids[size_t(id)], 0u) << "id " << id;
}

TEST(DataMlm, SpecialTokensNeverMasked) {
  std::vector<int32_t> ids = {0, 3, 32, 1, 2, 5, 5, 5};
  MlmOptions o;
  o.mlm_probability = 1.0;
  o.mask_replace_prob = 0.0;
  o.random_replace_prob = 1.0;
  for (uint64_t index = 0; index < 200; ++index) {
    std::vector<int32_t> x = ids, labels;
    apply_mlm_mask(x, labels, 3, RngStream::Mask, index, o);
    for (size_t t = 0; t < 5; ++t) {
      EXPECT_EQ(x[t], ids[t]);
      EXPECT_EQ(labels[t], -100);
    }
    for (size_t t = 5; t < 8; ++t) EXPECT_EQ(labels[t], 5);
  }
  // mlm_probability 0: nothing selected.
  o.mlm_probability = 0.0;
  std::vector<int32_t> x = ids, labels;
  apply_mlm_mask(x, labels, 3, RngStream::Mask, 0, o);
  EXPECT_EQ(x, ids);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), -100), 8);
}

TEST(DataMlm, MaskingKeyedBySeedCursorAndPosition) {
  std::vector<int32_t> ids(300, 5), a = ids, b = ids, c = ids, la, lb, lc;
  MlmOptions o;
  apply_mlm_mask(a, la, 1, RngStream::Mask, 10, o);
  apply_mlm_mask(b, lb, 1, RngStream::Mask, 10, o);
  apply_mlm_mask(c, lc, 1, RngStream::Mask, 11, o);
  EXPECT_EQ(a, b);
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lc);
  // Selection is rng_uniform(seed, Mask, index, position) < p.
  for (uint32_t t = 0; t < 300; ++t)
    EXPECT_EQ(la[t] != -100, rng_uniform(1, RngStream::Mask, 10, t) < 0.15f) << t;
}

TEST(DataMlm, DeterministicAndResumableFromCursor) {
  const SequenceDataset& ds = proteins();
  MlmOptions o = thd_options();
  MlmBatcher a(ds, o), b(ds, o);
  std::vector<Batch> batches;
  std::vector<uint64_t> cursors;
  // Run past an epoch boundary (2000 sequences, ~8 per 4096-token batch).
  for (int i = 0; i < 300; ++i) {
    cursors.push_back(a.cursor());
    batches.push_back(a.next());
    Batch other = b.next();
    ASSERT_TRUE(same_batch(batches.back(), other)) << "batch " << i;
  }
  EXPECT_GE(a.stats().epochs, 1u);
  for (int start : {0, 1, 37, 250, 299}) {
    MlmBatcher r(ds, o);
    r.set_cursor(cursors[size_t(start)]);
    for (int i = start; i < std::min(start + 5, 300); ++i)
      ASSERT_TRUE(same_batch(r.next(), batches[size_t(i)])) << "resumed at " << start << ", batch " << i;
  }
  MlmOptions o2 = o;
  o2.seed = 8;
  MlmBatcher c(ds, o2);
  EXPECT_FALSE(same_batch(c.next(), batches[0]));
}

TEST(DataMlm, ShuffleVisitsEverySequenceOncePerEpoch) {
  SequenceDataset ds = SequenceDataset::from_sequences([] {
    std::vector<std::string> v;
    for (int i = 0; i < 97; ++i) v.push_back(std::string(size_t(1 + i), "ACDEFGHIKLMNPQRSTVWY"[i % 20]));
    return v;
  }());
  MlmOptions o;
  o.mode = BatchMode::Bshd;
  o.micro_batch_size = 1;
  o.max_seq_length = 200;
  o.mlm_probability = 0.0;
  MlmBatcher mlm(ds, o);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int32_t> seen;
    for (int i = 0; i < 97; ++i) seen.insert(to_vec(mlm.next().seq_lens)[0]);
    for (int32_t len = 3; len < 100; ++len) EXPECT_EQ(seen.count(len), 1u) << "epoch " << epoch;
  }
  EXPECT_EQ(mlm.stats().epochs, 2u);
  EXPECT_EQ(mlm.stats().sequences, 194u);
}

TEST(DataMlm, ThdPackingRespectsBudgetAndNeverSplits) {
  const SequenceDataset& ds = proteins();
  MlmOptions o = thd_options();
  MlmBatcher mlm(ds, o);
  SampleOrder order(ds.size(), o.seed, true);
  uint64_t k = 0;
  for (int i = 0; i < 100; ++i) {
    Batch b = mlm.next();
    check_batch_layout(b, EsmTokenizer::kPad);
    EXPECT_LE(b.num_rows(), o.max_tokens_per_batch);
    EXPECT_EQ(b.num_rows(), b.num_real_tokens);  // no padding without pad_to_multiple_of
    auto ids = to_vec(b.input_ids), cu = to_vec(b.cu_seqlens), lens = to_vec(b.seq_lens);
    for (size_t s = 0; s < lens.size(); ++s, ++k) {
      uint64_t rec = order(k);
      int64_t expect = std::min<int64_t>(int64_t(ds.length(rec)) + 2, o.max_seq_length);
      ASSERT_EQ(lens[s], expect);
      EXPECT_EQ(cu[s + 1] - cu[s], lens[s]);
      EXPECT_EQ(ids[size_t(cu[s])], EsmTokenizer::kCls);
      EXPECT_EQ(ids[size_t(cu[s] + lens[s] - 1)], EsmTokenizer::kEos);
    }
    EXPECT_EQ(mlm.cursor(), k);
    // The next sample did not fit.
    int64_t next_len = std::min<int64_t>(int64_t(ds.length(order(k))) + 2, o.max_seq_length);
    EXPECT_GT(b.num_rows() + next_len, o.max_tokens_per_batch);
  }
  EXPECT_EQ(mlm.stats().sequences, k);
}

TEST(DataMlm, ThdPadToMultiple) {
  const SequenceDataset& ds = proteins();
  MlmOptions o = thd_options();
  o.pad_to_multiple_of = 64;
  MlmBatcher mlm(ds, o);
  uint64_t padding = 0;
  for (int i = 0; i < 30; ++i) {
    Batch b = mlm.next();
    check_batch_layout(b, EsmTokenizer::kPad);
    EXPECT_EQ(b.num_rows() % 64, 0);
    EXPECT_LE(b.num_rows(), o.max_tokens_per_batch);
    EXPECT_LT(b.num_rows() - b.num_real_tokens, 64);
    auto cu = to_vec(b.cu_seqlens), lens = to_vec(b.seq_lens);
    for (size_t s = 0; s + 1 < lens.size(); ++s) EXPECT_EQ(cu[s + 1] - cu[s], lens[s]);
    padding += uint64_t(b.num_rows() - b.num_real_tokens);
  }
  EXPECT_EQ(mlm.stats().padding_tokens, padding);
}

TEST(DataMlm, TruncationKeepsClsAndEos) {
  SequenceDataset ds = SequenceDataset::from_sequences(
      {std::string(10, 'A'), std::string(50, 'L'), std::string(100, 'G') + "J", std::string(30, 'K')});
  MlmOptions o;
  o.max_seq_length = 32;
  o.max_tokens_per_batch = 108;  // exactly the four samples
  o.shuffle = false;
  o.mlm_probability = 0.0;
  MlmBatcher mlm(ds, o);
  Batch b = mlm.next();
  check_batch_layout(b, EsmTokenizer::kPad);
  EXPECT_EQ(to_vec(b.seq_lens), (std::vector<int32_t>{12, 32, 32, 32}));
  auto ids = to_vec(b.input_ids);
  EXPECT_EQ(ids[12], EsmTokenizer::kCls);
  for (int t = 13; t < 43; ++t) EXPECT_EQ(ids[size_t(t)], 4);  // L
  EXPECT_EQ(ids[43], EsmTokenizer::kEos);
  EXPECT_EQ(mlm.stats().truncated, 2u);
  EXPECT_EQ(mlm.stats().unknown_tokens, 0u);  // the 'J' was cut off
  EXPECT_EQ(mlm.stats().sequences, 4u);
  EXPECT_EQ(b.max_seqlen, 32);
}

TEST(DataMlm, UnknownResiduesCounted) {
  SequenceDataset ds = SequenceDataset::from_sequences({"MKJJV", "M1K"});
  MlmOptions o;
  o.shuffle = false;
  o.max_seq_length = 16;
  o.max_tokens_per_batch = 16;
  MlmBatcher mlm(ds, o);
  mlm.next();
  EXPECT_EQ(mlm.stats().unknown_tokens, 3u);
  EXPECT_EQ(mlm.stats().batches, 1u);
}

TEST(DataMlm, BshdPadsToLongest) {
  SequenceDataset ds = SequenceDataset::from_sequences({"MKV", "MKVLLAG", "M", "MKVLL", "AAAA"});
  MlmOptions o;
  o.mode = BatchMode::Bshd;
  o.micro_batch_size = 4;
  o.shuffle = false;
  MlmBatcher mlm(ds, o);
  Batch b = mlm.next();
  check_batch_layout(b, EsmTokenizer::kPad);
  EXPECT_EQ(b.num_rows(), 4 * 9);
  EXPECT_EQ(to_vec(b.cu_seqlens), (std::vector<int32_t>{0, 9, 18, 27, 36}));
  EXPECT_EQ(to_vec(b.seq_lens), (std::vector<int32_t>{5, 9, 3, 7}));
  EXPECT_EQ(b.num_real_tokens, 24);
  EXPECT_EQ(b.max_seqlen, 9);
  auto ids = to_vec(b.input_ids);
  EXPECT_EQ(ids[18], EsmTokenizer::kCls);
  EXPECT_EQ(ids[20], EsmTokenizer::kEos);
  for (int t = 21; t < 27; ++t) EXPECT_EQ(ids[size_t(t)], EsmTokenizer::kPad);
  // Next batch wraps into epoch 1 (identity order: records 4, 0, 1, 2).
  Batch c = mlm.next();
  EXPECT_EQ(to_vec(c.seq_lens), (std::vector<int32_t>{6, 5, 9, 3}));
  EXPECT_EQ(mlm.epoch(), 1u);
  // pad_to_multiple_of rounds the padded length.
  o.pad_to_multiple_of = 8;
  MlmBatcher m8(ds, o);
  Batch d = m8.next();
  check_batch_layout(d, EsmTokenizer::kPad);
  EXPECT_EQ(to_vec(d.cu_seqlens), (std::vector<int32_t>{0, 16, 32, 48, 64}));
}

TEST(DataMlm, EvalPassInFileOrderWithFixedMasks) {
  SequenceDataset ds = SequenceDataset::load(source_path("data/proteins_val.fasta"));
  MlmOptions o = thd_options();
  MlmBatcher a(ds, o);
  o.seed = 99;  // the training seed does not change eval masks
  MlmBatcher b(ds, o);
  a.next();  // training batches do not disturb the eval pass
  std::vector<Batch> pass1;
  Batch x;
  uint64_t seqs = 0;
  while (a.next_eval(x)) {
    check_batch_layout(x, EsmTokenizer::kPad);
    EXPECT_LE(x.num_rows(), o.max_tokens_per_batch);
    auto lens = to_vec(x.seq_lens);
    for (int32_t l : lens) {
      EXPECT_EQ(l, std::min<int64_t>(int64_t(ds.length(seqs)) + 2, o.max_seq_length));
      ++seqs;
    }
    pass1.push_back(x);
  }
  EXPECT_EQ(seqs, ds.size());
  size_t i = 0;
  while (b.next_eval(x)) ASSERT_TRUE(same_batch(x, pass1[i++]));
  EXPECT_EQ(i, pass1.size());
  i = 0;
  while (a.next_eval(x)) ASSERT_TRUE(same_batch(x, pass1[i++]));  // a second pass, identical
  EXPECT_EQ(i, pass1.size());
  EXPECT_EQ(a.stats().batches, 1u);
}

TEST(DataMlm, OptionValidation) {
  SequenceDataset ds = SequenceDataset::from_sequences({"MKV"});
  MlmOptions o;
  o.max_tokens_per_batch = 512;
  std::string msg = error_of([&] { MlmBatcher m(ds, o); });
  EXPECT_TRUE(contains(msg, "max_tokens_per_batch (512) must be >= max_seq_length (1024)")) << msg;
  o = MlmOptions{};
  o.pad_to_multiple_of = 24;
  msg = error_of([&] { MlmBatcher m(ds, o); });
  EXPECT_TRUE(contains(msg, "multiple of pad_to_multiple_of")) << msg;
  o = MlmOptions{};
  o.mode = BatchMode::Bshd;
  o.micro_batch_size = 0;
  msg = error_of([&] { MlmBatcher m(ds, o); });
  EXPECT_TRUE(contains(msg, "micro_batch_size")) << msg;
  o = MlmOptions{};
  o.mlm_probability = 1.5;
  EXPECT_THROW(MlmBatcher(ds, o), Error);
  o = MlmOptions{};
  o.max_seq_length = 2;
  EXPECT_THROW(MlmBatcher(ds, o), Error);
  EXPECT_EQ(parse_batch_mode("THD"), BatchMode::Thd);
  EXPECT_EQ(parse_batch_mode("bshd"), BatchMode::Bshd);
  msg = error_of([&] { parse_batch_mode("sbhd"); });
  EXPECT_TRUE(contains(msg, "unknown batch mode 'sbhd'")) << msg;
  SequenceDataset empty;
  EXPECT_THROW(MlmBatcher(empty, MlmOptions{}), Error);
}
