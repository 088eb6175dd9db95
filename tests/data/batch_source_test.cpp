// BatchSource::skip (data parallelism walks past the other ranks' batches without building
// them) lands exactly where next() would.
#include "biofm/data/batch_source.h"

#include <gtest/gtest.h>

#include "biofm/data/dataset.h"
#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

void expect_skip_equals_next(BatchSource& built, BatchSource& skipped) {
  for (int i = 0; i < 40; ++i) {
    Batch b = built.next();
    skipped.skip();
    ASSERT_EQ(skipped.cursor(), built.cursor()) << "batch " << i;
    if (i % 7 == 3) ASSERT_TRUE(same_batch(built.next(), skipped.next())) << "batch after skip " << i;
  }
}

}  // namespace

TEST(DataBatchSource, SkipMatchesNextForMaskedLm) {
  const SequenceDataset ds = SequenceDataset::load(source_path("data/proteins_val.fasta"));
  for (BatchMode mode : {BatchMode::Thd, BatchMode::Bshd}) {
    DataOptions o;
    o.mode = mode;
    o.max_seq_length = 200;
    o.max_tokens_per_batch = 600;
    o.micro_batch_size = 3;
    o.pad_to_multiple_of = 8;
    auto a = make_mlm_source(o, ds, esm_tokenizer()), b = make_mlm_source(o, ds, esm_tokenizer());
    expect_skip_equals_next(*a, *b);
  }
}

TEST(DataBatchSource, SkipMatchesNextForCausalWindows) {
  const SequenceDataset ds = SequenceDataset::load(source_path("data/dna_val.fasta"));
  DataOptions o;
  o.max_seq_length = 300;
  o.stride = 20;
  o.max_tokens_per_batch = 1000;
  auto a = make_causal_source(o, ds, nucleotide_tokenizer()), b = make_causal_source(o, ds, nucleotide_tokenizer());
  expect_skip_equals_next(*a, *b);
}
