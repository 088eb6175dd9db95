// Input specs: directories, globs, lists and their errors.
#include <gtest/gtest.h>

#include "biofm/data/dataset.h"
#include "biofm/data/input_files.h"
#include "data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

TEST(DataInputFiles, DirectoryIsSortedAndSkipsUnknownExtensions) {
  TempDir dir;
  dir.write("b.fasta", ">b\nBBB\n");
  dir.write("a.fa", ">a\nAAA\n");
  dir.write("c.txt", "CCC\n");
  dir.write("README.md", "not sequences\n");
  dir.write("checksums.md5", "x\n");
  dir.write(".hidden.fasta", ">h\nHHH\n");  // hidden: ignored, not counted
  std::filesystem::create_directories(dir.path / "sub");
  dir.write("sub/d.fasta", ">d\nDDD\n");     // not recursive

  InputFiles in = expand_inputs(dir.path.string());
  ASSERT_EQ(in.files.size(), 3u);
  EXPECT_EQ(in.files[0], dir.file("a.fa"));
  EXPECT_EQ(in.files[1], dir.file("b.fasta"));
  EXPECT_EQ(in.files[2], dir.file("c.txt"));
  EXPECT_EQ(in.skipped, 2u);

  SequenceDataset ds = SequenceDataset::load(dir.path.string());
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.sequence(0), "AAA");
  EXPECT_EQ(ds.sequence(1), "BBB");
  EXPECT_EQ(ds.sequence(2), "CCC");
  EXPECT_EQ(ds.stats().files, 3u);
  EXPECT_EQ(ds.stats().skipped_files, 2u);
  EXPECT_EQ(ds.stats().format, "fasta+text");
  EXPECT_EQ(ds.stats().summary(), "3 sequences from 3 files (2 skipped: unknown extension)");
}

TEST(DataInputFiles, GlobMatchesInNameOrder) {
  TempDir dir;
  dir.write_gz("shard_2.jsonl.gz", "{\"sequence\": \"TWO\"}\n");
  dir.write("shard_10.jsonl", "{\"sequence\": \"TEN\"}\n");
  dir.write("shard_1.jsonl", "{\"sequence\": \"ONE\"}\n");
  dir.write("other.jsonl", "{\"sequence\": \"NOPE\"}\n");
  SequenceDataset ds = SequenceDataset::load(dir.file("shard_*.jsonl*"));
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.sequence(0), "ONE");  // byte order of the names: shard_1 < shard_10 < shard_2
  EXPECT_EQ(ds.sequence(1), "TEN");
  EXPECT_EQ(ds.sequence(2), "TWO");
  EXPECT_EQ(ds.stats().files, 3u);
  EXPECT_EQ(ds.stats().path, dir.file("shard_*.jsonl*"));
  // A glob match is a named file: an unknown extension is an error, as for any named file.
  dir.write("shard_x.dat", "X\n");
  std::string msg = error_of([&] { SequenceDataset::load(dir.file("shard_*")); });
  EXPECT_TRUE(contains(msg, "shard_x.dat")) << msg;
  EXPECT_TRUE(contains(msg, "extension")) << msg;
}

TEST(DataInputFiles, ListKeepsOrderAndMixesCompression) {
  TempDir dir;
  std::string a = dir.write_gz("a.fasta.gz", ">a1\nAAA\n>a2\nAAC\n");
  std::string b = dir.write("b.csv", "id,sequence\nb1,BBB\n");
  std::string c = dir.write("c.fa", ">c1\nCCC\n");
  ReaderOptions opt;
  opt.name_column = "id";
  SequenceDataset ds = SequenceDataset::load(c + ", " + a + "," + b, opt);
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_EQ(ds.name(0), "c1");
  EXPECT_EQ(ds.name(1), "a1");
  EXPECT_EQ(ds.name(2), "a2");
  EXPECT_EQ(ds.name(3), "b1");
  EXPECT_EQ(ds.stats().format, "fasta+csv");
  EXPECT_EQ(ds.stats().summary(), "4 sequences from 3 files");
  // max_records counts over the whole list; later files are not opened.
  opt.max_records = 2;
  ds = SequenceDataset::load(c + "," + a + "," + dir.file("missing.fa"), opt);
  EXPECT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.stats().files, 2u);
  // Entries may be directories and globs too; empty entries are ignored.
  std::filesystem::create_directories(dir.path / "more");
  dir.write("more/d.txt", "DDD\n");
  ds = SequenceDataset::load(dir.file("more") + ",," + dir.file("*.fa"));
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.sequence(0), "DDD");
  EXPECT_EQ(ds.sequence(1), "CCC");
  EXPECT_EQ(split_input_list(" a.fa ,b.fa,"), (std::vector<std::string>{"a.fa", "b.fa"}));
}

TEST(DataInputFiles, NothingMatchedIsAnErrorNamingThePattern) {
  TempDir dir;
  std::string pattern = dir.file("shard_*.fasta");
  std::string msg = error_of([&] { SequenceDataset::load(pattern); });
  EXPECT_TRUE(contains(msg, "no files match '" + pattern + "'")) << msg;

  dir.write("notes.md", "x\n");
  msg = error_of([&] { SequenceDataset::load(dir.path.string()); });
  EXPECT_TRUE(contains(msg, "directory " + dir.path.string())) << msg;
  EXPECT_TRUE(contains(msg, "no sequence files (1 other file(s) skipped")) << msg;
  EXPECT_TRUE(contains(msg, ".parquet")) << msg;

  // A Hugging Face dataset folder: its metadata JSON is not data, and the data's subfolder is named.
  TempDir hf;
  hf.write("dataset_info.json", "{\"features\": {}}\n");
  hf.write("README.md", "card\n");
  std::filesystem::create_directories(hf.path / "data");
  msg = error_of([&] { SequenceDataset::load(hf.path.string()); });
  EXPECT_TRUE(contains(msg, "no sequence files (2 other file(s) skipped")) << msg;
  EXPECT_TRUE(contains(msg, "subfolders are not searched: name them, e.g. " + (hf.path / "data" / "*").string())) << msg;

  // A biofm prepare output without its manifest (an unfinished prepare): said as such.
  TempDir unfinished;
  unfinished.write("train-00000-0000.shard", "x");
  unfinished.write("train-00001-0000.shard", "x");
  msg = error_of([&] { SequenceDataset::load(unfinished.path.string()); });
  EXPECT_TRUE(contains(msg, "holds 2 shard(s) of biofm prepare but no manifest.json")) << msg;

  msg = error_of([&] { SequenceDataset::load(" , "); });
  EXPECT_TRUE(contains(msg, "no input given")) << msg;
  // A missing file in a list is reported by name, like a missing single file.
  std::string ok = dir.write("ok.fa", ">a\nAAA\n");
  msg = error_of([&] { SequenceDataset::load(ok + "," + dir.file("gone.fa")); });
  EXPECT_TRUE(contains(msg, dir.file("gone.fa") + ": no such file")) << msg;
  // A named file with an unknown extension is an error, as before.
  std::string odd = dir.write("x.seq", "MKV\n");
  msg = error_of([&] { SequenceDataset::load(ok + "," + odd); });
  EXPECT_TRUE(contains(msg, "cannot tell the format of " + odd)) << msg;
}

TEST(DataInputFiles, ExistingPathIsNotAPattern) {
  TempDir dir;
  std::string weird = dir.write("a[1].fasta", ">a\nAAA\n");
  SequenceDataset ds = SequenceDataset::load(weird);
  EXPECT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds.stats().summary(), "1 sequence");
}
