// Streaming raw files (data/stream.h): the stream equals the in-memory dataset's order when
// unshuffled, the shuffle buffer's order is deterministic and resumable, memory stays at the
// buffer, bad input is named or counted.
#include "biofm/data/stream.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

StreamOptions stream_options(uint64_t buffer, bool shuffle = true, uint64_t seed = 42) {
  StreamOptions o;
  o.buffer = buffer;
  o.shuffle = shuffle;
  o.seed = seed;
  return o;
}

// The first n samples of a stream, as strings (residues as the tokenizer would read them).
std::vector<std::string> first_samples(const StreamingCorpus& c, uint64_t n) {
  std::vector<std::string> out;
  std::vector<int32_t> ids;
  for (uint64_t i = 0; i < n; ++i) {
    ids.clear();
    c.append_tokens(i, 0, c.length(i), nucleotide_tokenizer(), ids);
    out.emplace_back(ids.begin(), ids.end());
  }
  return out;
}

}  // namespace

TEST(DataStream, UnshuffledStreamGivesTheInMemoryBatchesOverSeveralPasses) {
  // Without shuffle both walk the records in file order, pass after pass, and masking is keyed
  // by the cursor: the batches must be identical, across the wrap into the second pass too.
  const std::string path = source_path("data/proteins_sample.fasta");
  SequenceDataset ds = SequenceDataset::load(path);
  StreamingCorpus st(path, stream_options(100, /*shuffle=*/false));
  MlmOptions o;
  o.shuffle = false;
  o.max_tokens_per_batch = 8192;
  MlmBatcher mem(ds, o), str(st, o);
  int batches = 0;
  while (mem.cursor() < ds.size() + 300) {
    ASSERT_TRUE(same_batch(mem.next(), str.next())) << "batch " << batches;
    ++batches;
  }
  EXPECT_EQ(str.cursor(), mem.cursor());
  EXPECT_EQ(st.passes(), 1u);
  EXPECT_GE(batches, 10);
}

TEST(DataStream, UnshuffledCausalStreamGivesTheInMemoryWindows) {
  const std::string path = source_path("data/dna_sample.fasta");
  SequenceDataset ds = SequenceDataset::load(path);
  CausalLmOptions o;
  o.max_seq_length = 512;
  o.stride = 64;
  o.max_tokens_per_batch = 2048;
  o.shuffle = false;
  StreamOptions so = stream_options(1, /*shuffle=*/false);
  so.window_max_seq_length = o.max_seq_length;
  so.window_stride = o.stride;
  StreamingCorpus st(path, so);
  CausalLmBatcher mem(ds, o), str(st, o, nucleotide_tokenizer());
  const uint64_t windows = mem.num_samples();
  while (mem.cursor() < windows + 50) ASSERT_TRUE(same_batch(mem.next(), str.next())) << "cursor " << mem.cursor();
  // A window longer than the batcher's (a stream cut for another max_seq_length) is refused.
  CausalLmOptions shorter = o;
  shorter.max_seq_length = 256;
  CausalLmBatcher wrong(st, shorter, nucleotide_tokenizer());
  EXPECT_TRUE(contains(error_of([&] { wrong.next(); }), "more than a window of 254"));
}

TEST(DataStream, ShuffleBufferOrderIsASeededFunctionOfTheIndex) {
  const std::string path = source_path("data/proteins_sample.fasta");
  SequenceDataset ds = SequenceDataset::load(path);
  const uint64_t n = ds.size(), buffer = 256;
  StreamingCorpus a(path, stream_options(buffer)), b(path, stream_options(buffer)), c(path, stream_options(buffer, true, 7));
  const auto sa = first_samples(a, n), sb = first_samples(b, n), sc = first_samples(c, n);
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  std::vector<std::string> file_order;
  for (uint64_t i = 0; i < n; ++i) file_order.emplace_back(ds.sequence(i));
  EXPECT_NE(sa, file_order);
  // Record r enters the buffer as item r, so no record can come back (from the next pass)
  // before sample n - buffer: the first n - buffer samples are distinct records of the file.
  std::multiset<std::string> all(file_order.begin(), file_order.end());
  std::set<std::string> seen;
  size_t duplicates_in_file = all.size() - std::set<std::string>(file_order.begin(), file_order.end()).size();
  for (uint64_t i = 0; i < n - buffer; ++i) {
    EXPECT_TRUE(all.count(sa[size_t(i)])) << i;
    seen.insert(sa[size_t(i)]);
  }
  EXPECT_GE(seen.size() + duplicates_in_file, n - buffer);
  // The first 200 samples mix what the buffer holds: 256 records then, so some come from
  // beyond the first 200 of the file.
  std::map<std::string, uint64_t> pos;
  for (uint64_t i = n; i-- > 0;) pos[file_order[size_t(i)]] = i;
  uint64_t beyond = 0;
  for (uint64_t i = 0; i < 200; ++i) beyond += pos[sa[size_t(i)]] >= 200;
  EXPECT_GT(beyond, 20u);
  EXPECT_GT(a.records_read(), n - 1);
  EXPECT_LE(a.resident_items(), buffer + 1);
}

TEST(DataStream, ResumeFromACursorIsBitIdentical) {
  const std::string path = source_path("data/proteins_sample.fasta");
  StreamingCorpus st(path, stream_options(300));
  MlmOptions o;
  o.max_tokens_per_batch = 4096;
  MlmBatcher a(st, o);
  std::vector<Batch> batches;
  std::vector<uint64_t> cursors;
  for (int i = 0; i < 220; ++i) {  // about 2 passes over the 2000 records
    cursors.push_back(a.cursor());
    batches.push_back(a.next());
  }
  EXPECT_GE(st.passes(), 1u);
  EXPECT_LE(st.resident_items(), 300u + 64u);  // the buffer and one batch, not the dataset
  for (int start : {0, 57, 219}) {
    StreamingCorpus fresh(path, stream_options(300));
    MlmBatcher r(fresh, o);
    r.set_cursor(cursors[size_t(start)]);
    for (int i = start; i < std::min(start + 3, 220); ++i)
      ASSERT_TRUE(same_batch(r.next(), batches[size_t(i)])) << "resumed at " << start << ", batch " << i;
  }
  // Going back on the same corpus replays the stream from its start.
  a.set_cursor(cursors[100]);
  ASSERT_TRUE(same_batch(a.next(), batches[100]));
  EXPECT_EQ(st.replays(), 1u);
}

TEST(DataStream, FilesAreReadInASeededOrderPerPass) {
  TempDir d;
  d.write("a.fasta", ">a1\nAAAA\n>a2\nAAAC\n");
  d.write("b.fasta", ">b1\nCCCC\n");
  d.write("c.fasta.gz", "");
  d.write_gz("c.fasta.gz", ">c1\nDDDD\n>c2\nDDDE\n>c3\nDDDF\n");
  StreamingCorpus st(d.path.string(), stream_options(1));  // buffer 1: the order files are read in
  const auto s = first_samples(st, 6 * 8);
  // Every pass reads all 6 records once, each file's records together and in order.
  for (int pass = 0; pass < 8; ++pass) {
    std::vector<std::string> p(s.begin() + pass * 6, s.begin() + pass * 6 + 6);
    std::multiset<std::string> got(p.begin(), p.end());
    EXPECT_EQ(got, (std::multiset<std::string>{"AAAA", "AAAC", "CCCC", "DDDD", "DDDE", "DDDF"})) << pass;
  }
  std::set<std::string> firsts;
  for (int pass = 0; pass < 8; ++pass) firsts.insert(s[size_t(pass * 6)]);
  EXPECT_GE(firsts.size(), 2u) << "the file order should change between passes";
  EXPECT_EQ(st.passes(), 7u);
  EXPECT_TRUE(contains(st.summary(), "streamed from 3 files")) << st.summary();
}

TEST(DataStream, BadInputIsNamedOrCounted) {
  TempDir d;
  EXPECT_TRUE(contains(error_of([&] { StreamingCorpus(d.file("missing.fasta"), stream_options(4)); }), "missing.fasta"));
  const std::string bad = d.write("bad.jsonl", "{\"sequence\": \"MKT\"}\nnot json\n{\"sequence\": \"MKV\"}\n");
  {
    StreamingCorpus st(bad, stream_options(1, false));
    EXPECT_EQ(st.length(0), 3u);
    EXPECT_TRUE(contains(error_of([&] { st.length(1); }), "bad.jsonl:2"));
  }
  {
    StreamOptions o = stream_options(1, false);
    o.reader.skip_malformed = true;
    StreamingCorpus st(bad, o);
    EXPECT_EQ(first_samples(st, 4), (std::vector<std::string>{"MKT", "MKV", "MKT", "MKV"}));
    EXPECT_EQ(st.skipped_records(), 1u);
    first_samples(st, 9);  // four passes over the file: the bad line is still one skipped record
    EXPECT_EQ(st.skipped_records(), 1u);
  }
  // A streamed set cannot be evaluated (it has no end).
  StreamingCorpus st(source_path("data/proteins_sample.fasta"), stream_options(8));
  MlmBatcher m(st, MlmOptions{});
  Batch b;
  EXPECT_TRUE(contains(error_of([&] { m.next_eval(b); }), "streamed dataset cannot be an evaluation set"));
  EXPECT_TRUE(contains(error_of([&] { StreamingCorpus(source_path("data/proteins_sample.fasta"), stream_options(0)); }),
                       "shuffle_buffer"));
}
