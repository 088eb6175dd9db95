// Shard files (data/shard.h): round trip and every corruption giving an error naming the shard.
#include "biofm/data/shard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

std::string write_shard(const TempDir& dir, const std::vector<std::vector<uint8_t>>& records, FileDigest* d = nullptr) {
  ShardWriter w;
  for (const auto& r : records) w.add(r.data(), r.size());
  const std::string path = dir.file("s.shard");
  FileDigest got = w.write(path);
  if (d) *d = got;
  return path;
}

void patch(const std::string& path, size_t offset, const void* bytes, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(offset));
  f.write(static_cast<const char*>(bytes), std::streamsize(n));
}

}  // namespace

TEST(DataShard, RoundTripAndDigest) {
  TempDir dir;
  const std::vector<std::vector<uint8_t>> recs = {{5, 6, 7}, {}, {1}, {32, 4, 4, 4, 9}};
  FileDigest d;
  const std::string path = write_shard(dir, recs, &d);
  ShardView v(path);
  ASSERT_EQ(v.records(), 4u);
  EXPECT_EQ(v.tokens(), 9u);
  EXPECT_EQ(d.bytes, std::filesystem::file_size(path));
  EXPECT_EQ(d.bytes, kShardHeaderBytes + 8 * 5 + 9);
  EXPECT_EQ(v.crc32(), d.crc32);
  for (size_t r = 0; r < recs.size(); ++r) {
    auto ids = v.record(r);
    EXPECT_EQ(std::vector<uint8_t>(ids.begin(), ids.end()), recs[r]) << r;
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST(DataShard, CorruptFilesAreNamed) {
  TempDir dir;
  const std::string path = write_shard(dir, {{5, 6, 7}, {8, 9}});
  const auto size = std::filesystem::file_size(path);

  std::filesystem::resize_file(path, size - 1);  // truncated token buffer
  EXPECT_TRUE(contains(error_of([&] { ShardView v(path); }), "corrupt shard " + path)) << path;

  write_shard(dir, {{5, 6, 7}, {8, 9}});
  patch(path, 0, "XXXX", 4);
  EXPECT_TRUE(contains(error_of([&] { ShardView v(path); }), "not a biofm shard"));

  write_shard(dir, {{5, 6, 7}, {8, 9}});
  const uint64_t huge = uint64_t(1) << 60;
  patch(path, 16, &huge, 8);  // record count
  EXPECT_TRUE(contains(error_of([&] { ShardView v(path); }), "does not match the file size"));

  // An offset inside the index pointing past the buffer: found when the record is read.
  write_shard(dir, {{5, 6, 7}, {8, 9}});
  const uint64_t bad = 4;
  patch(path, kShardHeaderBytes + 8, &bad, 8);  // offsets[1] = 4 > offsets[2]... record 1 = [4, 5)
  ShardView v(path);
  EXPECT_EQ(v.length(0), 4u);
  const uint64_t past = 99;
  patch(path, kShardHeaderBytes + 8, &past, 8);
  ShardView v2(path);
  const std::string e = error_of([&] { (void)v2.record(0); });
  EXPECT_TRUE(contains(e, "corrupt shard " + path) && contains(e, "record 0")) << e;

  std::filesystem::resize_file(path, 10);
  EXPECT_TRUE(contains(error_of([&] { ShardView v3(path); }), "shorter than its header"));
}
