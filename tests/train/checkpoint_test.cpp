#include "biofm/train/checkpoint.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "biofm/io/atomic_file.h"

using namespace biofm;
namespace fs = std::filesystem;

namespace {

CheckpointContents make(int64_t step, float value) {
  CheckpointContents c;
  c.step = step;
  c.data_cursor = uint64_t(step) * 10;
  c.config_yaml = "seed: 1\n";
  c.files["model"] = {{"w", Tensor::from_f32({3}, {value, value + 1, value + 2})}};
  return c;
}

std::string fresh_dir(const std::string& name) {
  std::string d = testing::TempDir() + "/biofm_ckpt_" + name;
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST(TrainCheckpoint, SaveLoadAndKeepLastK) {
  std::string dir = fresh_dir("keep");
  for (int s = 1; s <= 4; ++s) save_checkpoint(dir, make(s * 5, float(s)), 2);
  auto all = list_checkpoints(dir);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 15);
  EXPECT_EQ(all[1].first, 20);
  auto c = load_latest_checkpoint(dir);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 20);
  EXPECT_EQ(c->data_cursor, 200u);
  EXPECT_FLOAT_EQ(c->files.at("model").at("w").f32()[2], 6.0f);
}

TEST(TrainCheckpoint, HalfWrittenSavesAreNeverPicked) {
  std::string dir = fresh_dir("crash");
  save_checkpoint(dir, make(10, 1.0f), 5);
  // A crash mid-save leaves a hidden temporary directory; a step directory without a
  // manifest (e.g. copied by hand, interrupted) is not a checkpoint either.
  fs::create_directories(dir + "/.tmp_step_20.999");
  write_file_atomic(dir + "/.tmp_step_20.999/model.safetensors", "partial");
  fs::create_directories(dir + "/step_30");
  write_file_atomic(dir + "/step_30/model.safetensors", "partial");
  auto c = load_latest_checkpoint(dir);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 10);
}

TEST(TrainCheckpoint, CorruptNewestFallsBackToOlder) {
  std::string dir = fresh_dir("corrupt");
  save_checkpoint(dir, make(10, 1.0f), 5);
  std::string newest = save_checkpoint(dir, make(20, 2.0f), 5);
  std::string bytes = read_file(newest + "/model.safetensors");
  bytes[bytes.size() - 1] ^= 0x55;
  write_file_atomic(newest + "/model.safetensors", bytes);
  EXPECT_THROW(load_checkpoint(newest), Error);
  auto c = load_latest_checkpoint(dir);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 10);
}

TEST(TrainCheckpoint, UnwritableDirectoryFails) {
  if (::geteuid() == 0) {
    // root can write anywhere; use a path under a regular file instead.
    std::string f = testing::TempDir() + "/biofm_not_a_dir";
    write_file_atomic(f, "x");
    EXPECT_THROW(save_checkpoint(f + "/ckpt", make(1, 1.0f), 1), Error);
  } else {
    EXPECT_THROW(save_checkpoint("/proc/biofm_ckpt", make(1, 1.0f), 1), Error);
  }
}
