// Flat model shards (train/checkpoint.h: each rank of a fully sharded run writes the masters it
// holds): written by 3 ranks, loaded whole and into a 2-rank shard; a missing rank, shards of two
// runs of different sizes, or another model's shards are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "biofm/io/safetensors.h"
#include "biofm/models/params.h"
#include "testing.h"

using namespace biofm;
namespace fs = std::filesystem;

namespace {

std::vector<ParamSpec> specs(int extra = 0) {
  return {
      {"emb.weight", {7, 5}, Init::Normal, 0.5f, true},
      {"norm.weight", {5 + extra}, Init::Ones, 0, false},
      {"proj.weight", {3, 5}, Init::Normal, 0.02f, true},
  };
}

std::string shard_path(const std::string& dir, int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "model-rank%05d-of-%05d.safetensors", rank, world);
  return dir + "/" + name;
}

// The shards of a `world`-rank run of the model `specs(extra)` initialised with `seed`.
std::vector<std::string> write_shards(const std::string& dir, int world, uint64_t seed, int extra = 0) {
  std::vector<std::string> paths;
  for (int r = 0; r < world; ++r) {
    ParamStore part(specs(extra), Device::CPU, DType::F32, ParamShard{r, world});
    part.init(seed);
    paths.push_back(shard_path(dir, r, world));
    write_safetensors_stream(paths.back(), part.flat_shard_for_writing(DType::F32), part.flat_shard_metadata());
  }
  return paths;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

}  // namespace

TEST(ParamsFlatShards, LoadWholeOrIntoAnotherShardingAndRefuseMixedSets) {
  const std::string dir = (fs::temp_directory_path() / "biofm_flat_shards").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  ParamStore want(specs(), Device::CPU);
  want.init(5);
  const std::vector<std::string> three = write_shards(dir, 3, 5);

  ParamStore whole(specs(), Device::CPU);
  whole.init(99);
  whole.load_flat_shard_files(three);
  EXPECT_EQ(values(whole.flat()), values(want.flat()));

  ParamStore half(specs(), Device::CPU, DType::F32, ParamShard{1, 2});
  half.load_flat_shard_files(three);
  const auto [b, e] = half.held();
  EXPECT_EQ(values(half.flat()), values(want.flat().flat_slice(b, {e - b})));

  // Into a BF16 store: rounded once from the fp32 masters.
  ParamStore bf16(specs(), Device::CPU, DType::BF16);
  bf16.load_flat_shard_files(three);
  EXPECT_EQ(bf16.flat().dtype(), DType::BF16);

  using testkit::error_of;
  EXPECT_NE(error_of([&] { ParamStore s(specs(), Device::CPU); s.load_flat_shard_files({three[0], three[2]}); })
                .find("rank 1's file is missing"),
            std::string::npos);
  const std::vector<std::string> two = write_shards(dir, 2, 5);
  EXPECT_NE(error_of([&] { ParamStore s(specs(), Device::CPU); s.load_flat_shard_files({three[0], three[1], three[2], two[0]}); })
                .find("beside shards of a 3-rank run"),
            std::string::npos);
  // Another model (one parameter one element longer) with the same world size.
  const std::string other_dir = dir + "/other";
  fs::create_directories(other_dir);
  const std::vector<std::string> other = write_shards(other_dir, 3, 5, /*extra=*/1);
  EXPECT_NE(error_of([&] { ParamStore s(specs(), Device::CPU); s.load_flat_shard_files(other); }).find("another model"),
            std::string::npos);
  fs::remove_all(dir);
}
