// infer/input.h: the inference commands' input read a piece at a time — the same records, names
// and counts as SequenceDataset::load (files) and read_prepared_split (a prepared directory),
// skipped cheaply, and a corpus view that keeps at most two pieces.
#include "biofm/infer/input.h"

#include <gtest/gtest.h>

#include "biofm/core/error.h"
#include "biofm/core/notes.h"
#include "biofm/data/prepare.h"
#include "biofm/data/prepared.h"
#include "biofm/data/mlm.h"
#include "data/data_test_util.h"

using namespace biofm;
using biofm::infer::InputStream;
using biofm::infer::StreamedCorpus;

namespace {

// n records named r<first>.. with distinct residue strings; every fifth has an empty sequence
// (skipped and counted, as the readers do).
std::string fasta(int first, int n) {
  std::string s;
  for (int i = first; i < first + n; ++i) {
    s += ">r" + std::to_string(i) + " description\n";
    if (i % 5 == 4) continue;  // empty
    for (char c : std::to_string(i * 7919)) s += "ACDEFGHIKL"[c - '0'];
    s += "MKV\n";
  }
  return s;
}

// Every record of the stream, read `piece` at a time: (name, sequence).
std::vector<std::pair<std::string, std::string>> drain(InputStream& in, uint64_t piece) {
  std::vector<std::pair<std::string, std::string>> out;
  SequenceDataset part;
  while (uint64_t n = in.read(piece, part)) {
    EXPECT_LE(n, piece);
    EXPECT_EQ(part.size(), n);
    for (uint64_t i = 0; i < n; ++i) out.emplace_back(std::string(part.name(i)), std::string(part.sequence(i)));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> all_of(const SequenceDataset& d) {
  std::vector<std::pair<std::string, std::string>> out;
  for (uint64_t i = 0; i < d.size(); ++i) out.emplace_back(std::string(d.name(i)), std::string(d.sequence(i)));
  return out;
}

}  // namespace

TEST(InferInput, PiecesOfFilesAreTheLoadedRecordsInOrder) {
  biofm::testing::TempDir dir;
  dir.write("a.fasta", fasta(0, 13));
  dir.write_gz("b.fasta.gz", fasta(13, 9));
  const std::string spec = dir.file("a.fasta") + "," + dir.file("b.fasta.gz");
  const SequenceDataset whole = SequenceDataset::load(spec);
  ASSERT_GT(whole.size(), 10u);
  for (uint64_t piece : {1, 3, 7, 1000}) {
    InputStream in = InputStream::files(spec);
    EXPECT_EQ(drain(in, piece), all_of(whole)) << piece;
    EXPECT_EQ(in.position(), whole.size());
    // After the end, the counts are load's.
    EXPECT_EQ(in.stats().records, whole.stats().records);
    EXPECT_EQ(in.stats().skipped_empty, whole.stats().skipped_empty);
    EXPECT_EQ(in.stats().files, 2u);
    EXPECT_EQ(in.stats().summary(), whole.stats().summary());
    EXPECT_EQ(in.stats().bytes, whole.stats().bytes);
    EXPECT_EQ(in.stats().min_length, whole.stats().min_length);
    EXPECT_EQ(in.stats().max_length, whole.stats().max_length);
  }
}

TEST(InferInput, SkipRewindAndScan) {
  biofm::testing::TempDir dir;
  dir.write("a.fasta", fasta(0, 30));
  const SequenceDataset whole = SequenceDataset::load(dir.file("a.fasta"));
  const uint64_t n = whole.size();
  InputStream in = InputStream::files(dir.file("a.fasta"));
  SequenceDataset part;
  EXPECT_EQ(in.skip(5), 5u);
  EXPECT_EQ(in.read(4, part), 4u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(part.name(i), whole.name(5 + i));
  EXPECT_EQ(in.skip(1000), n - 9);  // to the end
  EXPECT_EQ(in.read(4, part), 0u);
  EXPECT_EQ(part.size(), 0u);
  in.rewind();
  EXPECT_EQ(in.position(), 0u);
  EXPECT_EQ(in.read(2, part), 2u);
  EXPECT_EQ(part.name(0), whole.name(0));
  // scan: every record once, in order, from the start wherever the stream was; rewound after.
  std::vector<std::string> seen;
  const DatasetStats st = infer::scan(in, [&](uint64_t i, std::string_view s) {
    EXPECT_EQ(i, seen.size());
    seen.emplace_back(s);
  }, 4);
  EXPECT_EQ(st.records, n);
  EXPECT_EQ(st.skipped_empty, whole.stats().skipped_empty);
  ASSERT_EQ(seen.size(), n);
  for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], whole.sequence(i));
  EXPECT_EQ(in.position(), 0u);
}

TEST(InferInput, ErrorsAreTheReadersOnes) {
  biofm::testing::TempDir dir;
  EXPECT_THROW(InputStream::files(dir.file("missing.fasta")), Error);
  dir.write("bad.fasta", "MKV\n>x\nMKV\n");  // sequence before the first header
  InputStream bad = InputStream::files(dir.file("bad.fasta"));
  SequenceDataset part;
  EXPECT_THROW(bad.read(10, part), Error);
}

TEST(InferInput, PreparedSplitInPiecesEqualsReadPreparedSplit) {
  biofm::testing::TempDir dir;
  dir.write("in.fasta", fasta(0, 1500));
  PrepareOptions o;
  o.input = dir.file("in.fasta");
  o.output = dir.file("prep");
  o.tokenizer = "esm";
  o.threads = 2;
  o.shard_bytes = 4096;  // several shards
  ASSERT_GT(prepare_dataset(o).shards, 3u);
  const SequenceDataset whole = read_prepared_split(dir.file("prep"), "train", esm_tokenizer());
  InputStream in = InputStream::prepared(dir.file("prep"), "train", esm_tokenizer());
  EXPECT_EQ(drain(in, 3), all_of(whole));
  in.rewind();
  SequenceDataset part;
  EXPECT_EQ(in.skip(6), 6u);
  EXPECT_EQ(in.read(2, part), 2u);
  EXPECT_EQ(part.name(0), "train:6");
  EXPECT_EQ(part.sequence(1), whole.sequence(7));
  EXPECT_THROW(InputStream::prepared(dir.file("prep"), "train", nucleotide_tokenizer()), Error);
}

TEST(InferInput, StreamedCorpusKeepsTwoPiecesAndEvalsAsInMemory) {
  biofm::testing::TempDir dir;
  dir.write("a.fasta", fasta(0, 60));
  const SequenceDataset whole = SequenceDataset::load(dir.file("a.fasta"));
  InputStream in = InputStream::files(dir.file("a.fasta"));
  {
    StreamedCorpus c(in, whole.size(), 5);
    for (uint64_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(c.sequence(i), whole.sequence(i));
      EXPECT_EQ(c.name(i), whole.name(i));
      EXPECT_LE(c.resident(), 10u);
      if (i >= 5) EXPECT_EQ(c.length(i - 5), whole.length(i - 5)) << "the piece before stays";
    }
    EXPECT_THROW(c.length(0), Error);  // gone: records are read forward
  }
  // MlmBatcher's evaluation pass over the streamed corpus: the batches of the whole input.
  in.rewind();
  StreamedCorpus c(in, whole.size(), 4);
  MlmOptions o;
  o.shuffle = false;
  o.max_seq_length = 24;
  o.max_tokens_per_batch = 64;
  MlmBatcher streamed(c, o), loaded(whole, o);
  Batch a, b;
  int batches = 0;
  while (loaded.next_eval(a)) {
    ASSERT_TRUE(streamed.next_eval(b));
    ASSERT_EQ(a.num_rows(), b.num_rows());
    for (int64_t t = 0; t < a.num_rows(); ++t) {
      EXPECT_EQ(a.input_ids.i32()[t], b.input_ids.i32()[t]);
      EXPECT_EQ(a.labels.i32()[t], b.labels.i32()[t]);
    }
    ++batches;
  }
  EXPECT_FALSE(streamed.next_eval(b));
  EXPECT_GT(batches, 5);
}

// Records of a table without a name column are named by their place in the input (their row in
// the outputs; a bedGraph track needs a name per record): across files and pieces, empty records
// skipped. With the name column the table's names are kept.
TEST(InferInput, UnnamedRecordsAreNamedByTheirPlace) {
  biofm::testing::TempDir dir;
  dir.write("a.csv", "id,sequence\nx1,MKV\nx2,\nx3,ACD\n");
  dir.write("b.txt", "WWW\n\nYYY\n");
  InputStream in = InputStream::files(dir.file("a.csv") + "," + dir.file("b.txt"));
  const auto got = drain(in, 2);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], std::make_pair(std::string("record:0"), std::string("MKV")));
  EXPECT_EQ(got[1], std::make_pair(std::string("record:1"), std::string("ACD")));
  EXPECT_EQ(got[2], std::make_pair(std::string("record:2"), std::string("WWW")));
  EXPECT_EQ(got[3], std::make_pair(std::string("record:3"), std::string("YYY")));
  ReaderOptions named;
  named.name_column = "id";
  InputStream by_id = InputStream::files(dir.file("a.csv"), named);
  const auto ids = drain(by_id, 10);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0].first, "x1");
  EXPECT_EQ(ids[1].first, "x3");
  // keep_empty (score, eval): empty records keep their place, so a name is the row in the output.
  ReaderOptions keep;
  keep.keep_empty = true;
  InputStream all = InputStream::files(dir.file("a.csv") + "," + dir.file("b.txt"), keep);
  const auto rows = drain(all, 2);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[1], std::make_pair(std::string("record:1"), std::string()));
  EXPECT_EQ(rows[2], std::make_pair(std::string("record:2"), std::string("ACD")));
  EXPECT_EQ(rows[4], std::make_pair(std::string("record:4"), std::string()));
  EXPECT_EQ(rows[5], std::make_pair(std::string("record:5"), std::string("YYY")));
  EXPECT_EQ(all.stats().skipped_empty, 2u);
}

// Names seen more than once in a scan are said in one note (distinct names counted, the first
// repeated one named); the hash table grows past its first 1024 slots without losing a name.
TEST(InferInput, ScanNotesDuplicateNamesOnce) {
  biofm::testing::TempDir dir;
  const std::string dup = dir.write("dup.fasta", ">a\nMKV\n>b\nMKV\n>a\nLLA\n>c\nM\n>b\nQ\n>a\nW\n");
  std::string many;
  for (int i = 0; i < 5000; ++i) many += ">r" + std::to_string(i) + "\nMKV\n";
  const std::string big = dir.write("many.fasta", many + ">r4321\nLLA\n");
  const std::string unique = dir.write("unique.fasta", many);
  auto notes_of = [](const std::string& path) {
    NoteCapture capture;
    InputStream in = InputStream::files(path);
    infer::scan(in, [](uint64_t, std::string_view) {}, 2);
    return capture.take();
  };
  EXPECT_EQ(notes_of(dup), std::vector<std::string>{dup + ": 2 record names appear more than once; first duplicate: 'a'; "
                                                           "rows keep input order (match outputs to the input by "
                                                           "position, not by name)"});
  const std::vector<std::string> one = notes_of(big);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(biofm::testing::contains(one[0], ": 1 record name appears more than once; first duplicate: 'r4321';"))
      << one[0];
  EXPECT_EQ(notes_of(unique), std::vector<std::string>{});
}
