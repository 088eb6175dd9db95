// Parquet input (data/parquet_rows.h) on the fixture made by tools/make_parquet_fixture.py: the
// first 50 records of data/proteins_val.fasta plus a null row. A build without Arrow/Parquet
// must say so when asked to read it.
#include "biofm/data/parquet_rows.h"

#include <gtest/gtest.h>

#include "biofm/data/dataset.h"
#include "biofm/data/reader.h"
#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {
const std::string kFixture = "tests/fixtures/data/proteins_val_head.parquet";
}

TEST(DataParquet, FormatFromTheExtension) {
  EXPECT_EQ(format_from_extension("x/uniref50_000.parquet"), SequenceFormat::Parquet);
  EXPECT_EQ(parse_format("parquet"), SequenceFormat::Parquet);
  EXPECT_STREQ(format_name(SequenceFormat::Parquet), "parquet");
}


TEST(DataParquet, RowsEqualTheFastaTheyCameFromOrABuildWithoutParquetSaysSo) {
  const std::string path = source_path(kFixture);
  if (!parquet_supported()) {
    const std::string e = error_of([&] { SequenceDataset::load(path); });
    EXPECT_TRUE(contains(e, path) && contains(e, "built without Parquet")) << e;
    return;
  }
  ReaderOptions o;
  o.name_column = "id";
  const SequenceDataset pq = SequenceDataset::load(path, o);
  ReaderOptions fo;
  fo.max_records = 50;
  const SequenceDataset fa = SequenceDataset::load(source_path("data/proteins_val.fasta"), fo);
  ASSERT_EQ(pq.size(), 50u);
  EXPECT_EQ(pq.stats().skipped_empty, 1u);  // the null row
  EXPECT_EQ(pq.stats().format, "parquet");
  for (uint64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(pq.sequence(i), fa.sequence(i)) << i;
    EXPECT_EQ(pq.name(i), fa.name(i)) << i;
  }
  // Row numbers stand in for line numbers; errors name the file and the columns.
  SequenceReader r(path, o);
  SequenceRecord rec;
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.line, 13u);  // row 11 is null: the 12th record is row 13
  ReaderOptions bad;
  bad.column = "seq";
  std::string e = error_of([&] { SequenceReader x(path, bad); });
  EXPECT_TRUE(contains(e, path + ": no column 'seq' in the Parquet schema (columns: 'id', 'Sequence', 'length')")) << e;
  bad.column = "length";
  e = error_of([&] { SequenceReader x(path, bad); });
  EXPECT_TRUE(contains(e, "holds int64, not strings")) << e;
  TempDir dir;
  const std::string junk = dir.write("junk.parquet", "this is not parquet at all, not even close");
  e = error_of([&] { SequenceReader x(junk); });
  EXPECT_TRUE(contains(e, junk + ": cannot read Parquet")) << e;
}
