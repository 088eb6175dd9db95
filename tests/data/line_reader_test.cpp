// LineReader: compression told from the magic bytes; zstd streaming and its errors.
#include <gtest/gtest.h>

#include "biofm/data/dataset.h"
#include "biofm/data/line_reader.h"
#include "data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  LineReader r(path);
  std::vector<std::string> out;
  std::string line;
  while (r.getline(line)) out.push_back(line);
  return out;
}

const unsigned char kZstdMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};

}  // namespace

TEST(DataLineReader, SniffsCompressionFromContent) {
  TempDir dir;
  EXPECT_EQ(sniff_compression(dir.write("p.fasta", ">a\nMKV\n")), Compression::None);
  EXPECT_EQ(sniff_compression(dir.write_gz("g.txt", "MKV\n")), Compression::Gzip);  // name says nothing
  EXPECT_EQ(sniff_compression(dir.write("z.txt", std::string((const char*)kZstdMagic, 4) + "xx")),
            Compression::Zstd);
  EXPECT_EQ(sniff_compression(dir.write("e.txt", "")), Compression::None);
  EXPECT_EQ(sniff_compression(dir.file("missing")), Compression::None);
  EXPECT_EQ(lines_of(dir.file("g.txt")), std::vector<std::string>{"MKV"});
}

#ifdef BIOFM_WITH_ZSTD

TEST(DataLineReader, ZstdRoundTrip) {
  ASSERT_TRUE(zstd_supported());
  TempDir dir;
  // Longer than the 1 MiB line buffer and zstd's block size, over two frames, CRLF in one.
  std::string long_seq(3 << 20, 'M');
  std::string plain = ">long\n" + long_seq + "\n>b\r\nACDE\r\n";
  std::string p = dir.write_zst("s.fasta.zst", {plain, ">c\nWWW"}, 19);
  EXPECT_EQ(lines_of(p), (std::vector<std::string>{">long", long_seq, ">b", "ACDE", ">c", "WWW"}));
  SequenceDataset ds = SequenceDataset::load(p);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.stats().format, "fasta");
  EXPECT_EQ(ds.length(0), long_seq.size());
  EXPECT_EQ(ds.sequence(2), "WWW");
  // The same records as the plain and gzip files.
  std::string text = plain + ">c\nWWW";
  SequenceDataset a = SequenceDataset::load(dir.write("s.fasta", text));
  SequenceDataset b = SequenceDataset::load(dir.write_gz("s.fasta.gz", text));
  for (const auto* d : {&a, &b}) {
    ASSERT_EQ(d->size(), ds.size());
    for (uint64_t i = 0; i < ds.size(); ++i) EXPECT_EQ(d->sequence(i), ds.sequence(i));
  }
}

TEST(DataLineReader, ZstdGzipAndPlainInOneList) {
  TempDir dir;
  std::string z = dir.write_zst("a.jsonl.zst", {"{\"sequence\": \"ZZZ\"}\n"});
  std::string g = dir.write_gz("b.tsv.gz", "id\tSequence\nb\tGGG\n");
  std::string p = dir.write("c.txt", "PPP\n");
  SequenceDataset ds = SequenceDataset::load(g + "," + z + "," + p);
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.sequence(0), "GGG");
  EXPECT_EQ(ds.sequence(1), "ZZZ");
  EXPECT_EQ(ds.sequence(2), "PPP");
  EXPECT_EQ(ds.stats().format, "tsv+jsonl+text");
  EXPECT_EQ(ds.stats().files, 3u);
}

TEST(DataLineReader, ZstdTruncatedOrCorruptNamesTheFile) {
  TempDir dir;
  std::string seq(100000, 'A');
  for (int i = 0; i < 100000; ++i) seq[size_t(i)] = "ACGT"[(i * 7 + i / 13) % 4];
  std::string p = dir.write_zst("t.fasta.zst", {">a\n" + seq + "\n"});
  std::filesystem::resize_file(p, std::filesystem::file_size(p) / 2);
  std::string msg = error_of([&] { SequenceDataset::load(p); });
  EXPECT_TRUE(contains(msg, "error reading " + p)) << msg;
  EXPECT_TRUE(contains(msg, "zstd")) << msg;

  std::string bad = dir.write("c.txt.zst", std::string((const char*)kZstdMagic, 4) + std::string(64, '\x7f'));
  msg = error_of([&] { SequenceDataset::load(bad); });
  EXPECT_TRUE(contains(msg, "error reading " + bad + " (corrupt zstd?)")) << msg;
}

#else

TEST(DataLineReader, ZstdWithoutZstdSupportIsAClearError) {
  ASSERT_FALSE(zstd_supported());
  TempDir dir;
  std::string p = dir.write("s.fasta.zst", std::string((const char*)kZstdMagic, 4) + "rest");
  std::string msg = error_of([&] { SequenceDataset::load(p); });
  EXPECT_TRUE(contains(msg, p)) << msg;
  EXPECT_TRUE(contains(msg, "built without zstd")) << msg;
}

#endif
