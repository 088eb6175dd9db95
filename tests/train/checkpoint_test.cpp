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

// ---------------------------------------------------------------- training checkpoints

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "biofm/models/esm2/model.h"
#include "biofm/models/registry.h"
#include "hf_fixture.h"
#include "models/tiny_models.h"

namespace {

// One unpadded sequence <cls> residues <eos>, no labels.
Batch small_batch() {
  SafetensorsFile f;
  std::vector<int32_t> ids = {0, 5, 9, 13, 4, 20, 8, 11, 2};
  const int64_t S = int64_t(ids.size());
  f.tensors["input_ids"] = Tensor::from_i32({1, S}, ids);
  f.tensors["attention_mask"] = Tensor::from_i32({1, S}, std::vector<int32_t>(size_t(S), 1));
  f.tensors["labels"] = Tensor::from_i32({1, S}, std::vector<int32_t>(size_t(S), -100));
  std::vector<int64_t> row_of;
  return testkit::hf_fixture_batch(f, false, false, row_of);
}

}  // namespace

TEST(TrainCheckpoint, TrainingCheckpointResumesAndIsAModelDirectory) {
  const std::string dir = fresh_dir("training");
  Esm2Model model(testkit::tiny_esm2_config(), Device::CPU);
  model.params().init(11);
  AdamW opt(model.params(), AdamWConfig{});
  model.params().grad_flat().fill_(0.01f);
  opt.step(1e-3f);  // non-zero moments
  TrainerState st{7, 70, R"({"epoch": 1})", "seed: 3\n"};
  const std::string step_dir = save_training_checkpoint(dir, st, model, opt, 2);
  EXPECT_EQ(fs::path(step_dir).filename(), "step_7");

  // The manifest covers the Hugging Face metadata too.
  nlohmann::json manifest = nlohmann::json::parse(read_file(step_dir + "/manifest.json"));
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "trainer_state.json", "config.yaml", "config.json",
                        "vocab.txt"})
    EXPECT_TRUE(manifest["files"].contains(f)) << f;

  // biofm embed/eval --model ckpt/step_N: the step directory loads as a model directory.
  const Batch b = small_batch();
  const Tensor want = model.logits(b);
  auto loaded = load_model_dir(step_dir, Device::CPU);
  const Tensor got = loaded->logits(b);
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.f32()[i], want.f32()[i]) << i;

  // Resume restores parameters, moments and the trainer state.
  Esm2Model fresh(testkit::tiny_esm2_config(), Device::CPU);
  AdamW fresh_opt(fresh.params(), AdamWConfig{});
  std::string chosen;
  auto back = resume_training_checkpoint(dir, fresh, fresh_opt, &chosen);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(chosen, step_dir);
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->data_cursor, 70u);
  EXPECT_EQ(back->config_yaml, "seed: 3\n");
  EXPECT_EQ(nlohmann::json::parse(back->state_json)["epoch"], 1);
  EXPECT_EQ(fresh_opt.steps_taken(), 7);
  for (size_t p = 0; p < model.params().size(); ++p) {
    const Tensor a = model.params().param(p), b2 = fresh.params().param(p);
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(b2.f32()[i], a.f32()[i]) << model.params().spec(p).name;
  }
  for (const char* k : {"exp_avg", "exp_avg_sq"})
    for (int64_t i = 0; i < model.params().numel(); ++i)
      ASSERT_EQ(fresh_opt.moment(k).f32()[i], opt.moment(k).f32()[i]) << k << " " << i;
}

TEST(TrainCheckpoint, ResumeSkipsACorruptNewestTrainingCheckpoint) {
  const std::string dir = fresh_dir("training_corrupt");
  Esm2Model model(testkit::tiny_esm2_config(), Device::CPU);
  model.params().init(1);
  AdamW opt(model.params(), AdamWConfig{});
  save_training_checkpoint(dir, {1, 10, "", ""}, model, opt, 3);
  const std::string newest = save_training_checkpoint(dir, {2, 20, "", ""}, model, opt, 3);
  {
    std::fstream f(newest + "/optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  Esm2Model fresh(testkit::tiny_esm2_config(), Device::CPU);
  AdamW fresh_opt(fresh.params(), AdamWConfig{});
  testing::internal::CaptureStderr();
  auto back = resume_training_checkpoint(dir, fresh, fresh_opt);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->step, 1);
  EXPECT_NE(err.find("optimizer.safetensors"), std::string::npos) << err;
}

TEST(TrainCheckpoint, ResumeFallsBackPastAValidJsonManifestWithoutFiles) {
  // Issue 15: a manifest that is valid JSON but lacks files/crc32/bytes, a trainer state that
  // disagrees with its directory, or a step directory name too long for int64 must each fall
  // back to the previous checkpoint with a warning, never end resume with an internal error.
  Esm2Model model(testkit::tiny_esm2_config(), Device::CPU);
  model.params().init(1);
  AdamW opt(model.params(), AdamWConfig{});
  for (const char* manifest : {R"({"format": "biofm-checkpoint-v1", "step": 2})",
                               R"({"files": {"model.safetensors": {"bytes": 1}}})",
                               R"({"files": {"model.safetensors": {"crc32": "x", "bytes": 1}}})",
                               R"({"files": {}})"}) {
    const std::string dir = fresh_dir("manifest_fallback");
    save_training_checkpoint(dir, {1, 10, "", ""}, model, opt, 3);
    const std::string newest = save_training_checkpoint(dir, {2, 20, "", ""}, model, opt, 3);
    write_file_atomic(newest + "/manifest.json", manifest);
    fs::create_directories(dir + "/step_99999999999999999999999");
    write_file_atomic(dir + "/step_99999999999999999999999/manifest.json", "{}");
    Esm2Model fresh(testkit::tiny_esm2_config(), Device::CPU);
    AdamW fresh_opt(fresh.params(), AdamWConfig{});
    testing::internal::CaptureStderr();
    std::optional<TrainerState> back;
    EXPECT_NO_THROW(back = resume_training_checkpoint(dir, fresh, fresh_opt)) << manifest;
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(back.has_value()) << manifest;
    EXPECT_EQ(back->step, 1) << manifest;
    EXPECT_NE(err.find("step_2"), std::string::npos) << err;
  }
}

TEST(TrainCheckpoint, StaleTemporaryDirectoriesAreRemoved) {
  const std::string dir = fresh_dir("stale_tmp");
  fs::create_directories(dir + "/.tmp_step_5.2147483646/x");  // no such process
  fs::create_directories(dir + "/.tmp_step_6." + std::to_string(getpid()));  // ours: an earlier failed save
  fs::create_directories(dir + "/.tmp_step_7.1");  // init: a live process, kept
  fs::create_directories(dir + "/step_3");
  testing::internal::CaptureStdout();
  remove_stale_tmp_dirs(dir);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_FALSE(fs::exists(dir + "/.tmp_step_5.2147483646"));
  EXPECT_FALSE(fs::exists(dir + "/.tmp_step_6." + std::to_string(getpid())));
  EXPECT_TRUE(fs::exists(dir + "/.tmp_step_7.1"));
  EXPECT_TRUE(fs::exists(dir + "/step_3"));
  EXPECT_NE(out.find(".tmp_step_5"), std::string::npos) << out;
}
