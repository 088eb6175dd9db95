// Genomic causal-LM batching: windowing, shifted labels, genomic masking, packing.
#include <gtest/gtest.h>

#include "biofm/core/rng.h"
#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

std::string random_dna(size_t n, uint64_t seed) {
  std::string s(n, 'A');
  for (size_t i = 0; i < n; ++i) s[i] = "ACGT"[rng_below(seed, RngStream::Sample, i, 0, 4)];
  return s;
}

}  // namespace

TEST(DataCausal, WindowCounts) {
  EXPECT_EQ(num_windows(50'000, 8192, 200), 7u);  // FACTS.md
  EXPECT_EQ(num_windows(51'200, 8192, 200), 7u);  // 50 KiB as well
  EXPECT_EQ(num_windows(8190, 8192, 200), 1u);
  EXPECT_EQ(num_windows(8191, 8192, 200), 2u);
  EXPECT_EQ(num_windows(1, 8192, 200), 1u);
  EXPECT_EQ(num_windows(0, 8192, 200), 0u);
  EXPECT_EQ(num_windows(10, 6, 0), 3u);  // windows of 4 bases, no overlap: 4 + 4 + 2
  auto w = make_windows(50'000, 8192, 200);
  ASSERT_EQ(w.size(), 7u);
  EXPECT_EQ(w[0].start, 0u);
  for (size_t j = 0; j + 1 < w.size(); ++j) {
    EXPECT_EQ(w[j].length, 8190u);
    EXPECT_EQ(w[j].start + w[j].length - w[j + 1].start, 200u);  // overlap
  }
  EXPECT_EQ(w.back().start + w.back().length, 50'000u);
}

TEST(DataCausal, WindowsOf50kbSequence) {
  std::string seq = random_dna(50'000, 1);
  SequenceDataset ds = SequenceDataset::from_sequences({"ACGTACGTAC", seq});
  CausalLmOptions o;
  o.shuffle = false;
  CausalLmBatcher lm(ds, o);
  EXPECT_EQ(lm.num_samples(), 8u);  // 1 + 7
  Batch b;
  std::vector<int32_t> lens;
  std::string rebuilt;
  uint64_t windows = 0;
  while (lm.next_eval(b)) {
    check_batch_layout(b, NucleotideTokenizer::kPad);
    EXPECT_LE(b.num_rows(), o.max_tokens_per_batch);
    auto ids = to_vec(b.input_ids), cu = to_vec(b.cu_seqlens), l = to_vec(b.seq_lens);
    for (size_t s = 0; s < l.size(); ++s, ++windows) {
      EXPECT_LE(l[s], 8192);
      EXPECT_EQ(ids[size_t(cu[s])], NucleotideTokenizer::kBos);
      EXPECT_EQ(ids[size_t(cu[s] + l[s] - 1)], NucleotideTokenizer::kEos);
      if (windows == 0) continue;
      auto [rec, win] = lm.window(windows);
      EXPECT_EQ(rec, 1u);
      std::string text;
      for (int32_t t = 1; t + 1 < l[s]; ++t) text += char(ids[size_t(cu[s] + t)]);
      EXPECT_EQ(text, seq.substr(win.start, win.length));
      lens.push_back(l[s]);
    }
  }
  EXPECT_EQ(windows, 8u);
  EXPECT_EQ(lens, (std::vector<int32_t>{8192, 8192, 8192, 8192, 8192, 8192, 2062}));
}

TEST(DataCausal, ShiftedLabelsAndGenomicMasking) {
  NucleotideTokenizer tok;
  auto ids = tok.encode("ACgNtX");  // <BOS> A C g N t X <EOS>
  std::vector<int32_t> labels;
  causal_labels(ids, labels, true, false);
  EXPECT_EQ(labels, (std::vector<int32_t>{'A', 'C', 'g', -100, 't', -100, -100, -100}));
  causal_labels(ids, labels, true, true);
  EXPECT_EQ(labels, (std::vector<int32_t>{'A', 'C', 'G', -100, 'T', -100, -100, -100}));
  causal_labels(ids, labels, false, false);
  EXPECT_EQ(labels, (std::vector<int32_t>{'A', 'C', 'g', 'N', 't', 'X', NucleotideTokenizer::kEos, -100}));
}

TEST(DataCausal, PackedBatchLabelsNeverCrossSequences) {
  SequenceDataset ds = SequenceDataset::load(source_path("data/dna_sample.fasta"));
  CausalLmOptions o;
  o.max_seq_length = 1024;
  o.stride = 100;
  o.max_tokens_per_batch = 4096;
  o.pad_to_multiple_of = 16;
  o.uppercase_labels = true;
  CausalLmBatcher lm(ds, o);
  uint64_t labelled = 0, degenerate = 0;
  for (int i = 0; i < 40; ++i) {
    Batch b = lm.next();
    check_batch_layout(b, NucleotideTokenizer::kPad);
    EXPECT_LE(b.num_rows(), 4096);
    EXPECT_EQ(b.num_rows() % 16, 0);
    auto ids = to_vec(b.input_ids), labels = to_vec(b.labels), cu = to_vec(b.cu_seqlens), l = to_vec(b.seq_lens);
    for (size_t s = 0; s < l.size(); ++s) {
      int32_t a = cu[s], n = l[s];
      EXPECT_EQ(labels[size_t(a + n - 1)], -100);  // last token of every sequence
      for (int32_t t = 0; t + 1 < n; ++t) {
        int32_t next = ids[size_t(a + t + 1)], lab = labels[size_t(a + t)];
        if (NucleotideTokenizer::is_acgt(next)) {
          EXPECT_EQ(lab, std::toupper(next));
          ++labelled;
        } else {
          EXPECT_EQ(lab, -100);
          degenerate += next != NucleotideTokenizer::kEos;
        }
      }
    }
  }
  EXPECT_GT(labelled, 100'000u);
  EXPECT_EQ(lm.stats().batches, 40u);
  // The 16S sample holds a few IUPAC codes (N, R, Y, ...); their targets carry no label.
  EXPECT_GT(degenerate, 0u);
  EXPECT_GE(lm.stats().real_tokens, labelled);
}

TEST(DataCausal, DeterministicAndResumable) {
  SequenceDataset ds = SequenceDataset::load(source_path("data/dna_sample.fasta"));
  CausalLmOptions o;
  o.max_seq_length = 512;
  o.stride = 64;
  o.max_tokens_per_batch = 2048;
  CausalLmBatcher a(ds, o);
  std::vector<Batch> batches;
  std::vector<uint64_t> cursors;
  for (int i = 0; i < 400; ++i) {  // > 1 epoch of ~600 windows
    cursors.push_back(a.cursor());
    batches.push_back(a.next());
  }
  EXPECT_GE(a.stats().epochs, 1u);
  for (int start : {0, 123, 399}) {
    CausalLmBatcher r(ds, o);
    r.set_cursor(cursors[size_t(start)]);
    ASSERT_TRUE(same_batch(r.next(), batches[size_t(start)])) << start;
  }
}

TEST(DataCausal, BshdAndValidation) {
  SequenceDataset ds = SequenceDataset::from_sequences({"ACGT", "ACGTACGTAC"});
  CausalLmOptions o;
  o.mode = BatchMode::Bshd;
  o.micro_batch_size = 2;
  o.max_seq_length = 8;
  o.stride = 2;
  o.shuffle = false;
  CausalLmBatcher lm(ds, o);
  EXPECT_EQ(lm.num_samples(), 3u);  // "ACGT"; then windows of 6 bases, step 4: [0, 6) and [4, 10)
  Batch b = lm.next();
  check_batch_layout(b, NucleotideTokenizer::kPad);
  EXPECT_EQ(to_vec(b.seq_lens), (std::vector<int32_t>{6, 8}));
  EXPECT_EQ(to_vec(b.cu_seqlens), (std::vector<int32_t>{0, 8, 16}));
  Batch c = lm.next();
  EXPECT_EQ(to_vec(c.seq_lens), (std::vector<int32_t>{8, 6}));  // window 2, then epoch 1 starts
  o.mode = BatchMode::Thd;
  o.max_tokens_per_batch = 4;
  std::string msg = error_of([&] { CausalLmBatcher m(ds, o); });
  EXPECT_TRUE(contains(msg, "max_tokens_per_batch (4) must be >= max_seq_length (8)")) << msg;
  o.max_tokens_per_batch = 64;
  o.stride = 6;
  msg = error_of([&] { CausalLmBatcher m(ds, o); });
  EXPECT_TRUE(contains(msg, "stride (6)")) << msg;
}

TEST(DataCausal, UniformBatchesAreRecognised) {
  // Batch::uniform(): every sequence exactly max_seqlen long with no padding rows (full
  // windows), which lets the GPU attention run dense kernels. Anything else is not uniform.
  auto build = [](std::vector<int32_t> lens, BatchMode mode, int64_t pad) {
    BatchBuilder bb;
    for (int32_t n : lens) {
      std::vector<int32_t> ids(size_t(n), 5), labels(size_t(n), 5);
      bb.add(ids.data(), labels.data(), n);
    }
    return bb.build(mode, pad, 0);
  };
  EXPECT_TRUE(build({8, 8, 8}, BatchMode::Thd, 1).uniform());
  EXPECT_TRUE(build({8, 8}, BatchMode::Bshd, 1).uniform());
  EXPECT_TRUE(build({8, 8}, BatchMode::Thd, 8).uniform());   // already a multiple: no padding rows
  EXPECT_TRUE(build({5}, BatchMode::Thd, 1).uniform());
  EXPECT_FALSE(build({8, 7}, BatchMode::Thd, 1).uniform());  // a short tail window
  EXPECT_FALSE(build({8, 7}, BatchMode::Bshd, 1).uniform());
  EXPECT_FALSE(build({8, 8, 8}, BatchMode::Thd, 16).uniform());  // 8 padding rows after the last sequence
  EXPECT_FALSE(build({6, 6}, BatchMode::Bshd, 4).uniform());  // slots of 8 for 6 tokens
  EXPECT_FALSE(Batch().uniform());
}
