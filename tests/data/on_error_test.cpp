// dataset.on_error: a malformed record or a truncated gzip member fails naming the file and
// line (default) or, with ReaderOptions::skip_malformed, is skipped and counted.
#include <gtest/gtest.h>

#include "biofm/data/dataset.h"
#include "biofm/data/reader.h"
#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

ReaderOptions skipping() {
  ReaderOptions o;
  o.skip_malformed = true;
  return o;
}

std::vector<std::string> sequences(const std::string& path, const ReaderOptions& o) {
  SequenceReader r(path, o);
  std::vector<std::string> out;
  SequenceRecord rec;
  while (r.next(rec)) out.push_back(rec.sequence);
  return out;
}

}  // namespace

TEST(DataOnError, FastaNamelessHeaderIsSkippedWithItsSequenceLines) {
  TempDir dir;
  const std::string p = dir.write("x.fasta", ">a\nMKV\n>\nQQQ\nWWW\n>b\nACD\n");
  EXPECT_TRUE(contains(error_of([&] { sequences(p, {}); }), p + ":3: FASTA header with no name"));
  SequenceReader r(p, skipping());
  SequenceRecord rec;
  std::vector<std::string> got;
  while (r.next(rec)) got.push_back(rec.name + "=" + rec.sequence);
  EXPECT_EQ(got, (std::vector<std::string>{"a=MKV", "b=ACD"}));
  EXPECT_EQ(r.skipped_malformed(), 1u);  // the record, not each of its lines
  EXPECT_TRUE(contains(r.first_error(), p + ":3:"));
}

TEST(DataOnError, CsvAndJsonlRecordsAreSkippedOneByOne) {
  TempDir dir;
  const std::string csv = dir.write("x.csv", "id,sequence\n1,MKV\n2,MQ,extra\n3,ACD\n");
  EXPECT_TRUE(contains(error_of([&] { sequences(csv, {}); }), csv + ":3: expected 2 fields"));
  EXPECT_EQ(sequences(csv, skipping()), (std::vector<std::string>{"MKV", "ACD"}));
  const std::string jl = dir.write("x.jsonl", "{\"sequence\":\"MKV\"}\n{oops\n[1]\n{\"sequence\":\"ACD\"}\n");
  SequenceReader r(jl, skipping());
  SequenceRecord rec;
  int n = 0;
  while (r.next(rec)) ++n;
  EXPECT_EQ(n, 2);
  EXPECT_EQ(r.skipped_malformed(), 2u);
}

// A quote inside an unquoted field (`seq"X`) or text after a closing quote (`"MK"V`) breaks
// RFC 4180: a malformed record like any other (it used to lose the quote silently, or swallow the
// lines after it as one quoted field); blanks around a quoted field stay accepted.
TEST(DataOnError, CsvQuotesInsideUnquotedFieldsAreMalformedRecords) {
  TempDir dir;
  const std::string csv = dir.write("q.csv", "id,sequence\n1,MK\"V\n2,\"MK\"V\n3,ACD\n4, \"LLA\" \n");
  const std::string e = error_of([&] { sequences(csv, {}); });
  EXPECT_TRUE(contains(e, csv + ":2: a '\"' inside unquoted field 2 (RFC 4180: a field holding a '\"' is quoted whole, "
                            "each '\"' inside doubled: \"se\"\"q\")")) << e;
  SequenceReader r(csv, skipping());
  SequenceRecord rec;
  std::vector<std::string> got;
  while (r.next(rec)) got.push_back(rec.sequence);
  EXPECT_EQ(got, (std::vector<std::string>{"ACD", "LLA"}));
  EXPECT_EQ(r.skipped_malformed(), 2u);
  EXPECT_TRUE(contains(r.first_error(), csv + ":2: a '\"' inside unquoted field 2")) << r.first_error();
  const std::string after = dir.write("a.tsv", "sequence\tid\n\"MK\"V\tx\n");
  EXPECT_TRUE(contains(error_of([&] { sequences(after, {}); }), after + ":2: text after the closing quote of field 1"));
}

TEST(DataOnError, TruncatedGzipInOneFileOfADirectory) {
  TempDir dir;
  std::string big;
  for (int i = 0; i < 20000; ++i) big += ">r" + std::to_string(i) + "\nMKVLAAGIVACDEFGHIKLMNPQRSTVWY" + std::to_string(i % 7) + "\n";
  dir.write_gz("a.fasta.gz", ">a\nMKV\n");
  const std::string b = dir.write_gz("b.fasta.gz", big);
  dir.write_gz("c.fasta.gz", ">c\nACD\n");
  const auto full = std::filesystem::file_size(b);
  std::filesystem::resize_file(b, full / 2);
  const std::string e = error_of([&] { SequenceDataset::load(dir.path.string()); });
  EXPECT_TRUE(contains(e, b)) << e;
  const SequenceDataset ds = SequenceDataset::load(dir.path.string(), skipping());
  EXPECT_EQ(ds.stats().files, 3u);
  EXPECT_EQ(ds.stats().skipped_malformed, 1u);  // b's unreadable tail
  EXPECT_GT(ds.size(), 1000u);                  // the records before the cut are kept
  EXPECT_LT(ds.size(), 20002u);
  EXPECT_EQ(ds.sequence(ds.size() - 1), "ACD");  // and reading went on with c
  EXPECT_TRUE(contains(ds.summary(), "1 malformed record(s) skipped")) << ds.summary();
  EXPECT_TRUE(contains(ds.summary(), b)) << ds.summary();
  EXPECT_EQ(ds.skipped_records(), 1u);
}

TEST(DataOnError, AFileOfOnlyMalformedRecordsIsStillAnError) {
  TempDir dir;
  const std::string p = dir.write("x.jsonl", "nope\nnope either\n");
  const std::string e = error_of([&] { sequences(p, skipping()); });
  EXPECT_TRUE(contains(e, p + ": no usable sequences (2 malformed")) << e;
}
