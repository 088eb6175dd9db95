#include "biofm/train/checkpoint.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
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

// A step directory without a manifest (lost or deleted: saves rename only whole directories into
// place) is reported like every other unusable checkpoint (it used to be skipped silently); an
// empty step_N is no checkpoint at all.
TEST(TrainCheckpoint, ResumeWarnsAboutAStepDirectoryWithoutAManifest) {
  const std::string dir = fresh_dir("no_manifest");
  Esm2Model model(testkit::tiny_esm2_config(), Device::CPU);
  model.params().init(1);
  AdamW opt(model.params(), AdamWConfig{});
  save_training_checkpoint(dir, {1, 10, "", ""}, model, opt, 0);
  const std::string newest = save_training_checkpoint(dir, {2, 20, "", ""}, model, opt, 0);
  fs::remove(newest + "/manifest.json");
  fs::create_directories(dir + "/step_5");
  EXPECT_EQ(list_checkpoints(dir).size(), 1u);
  const auto listed = list_checkpoints(dir, /*incomplete=*/true);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed.back().second, newest);
  Esm2Model fresh(testkit::tiny_esm2_config(), Device::CPU);
  AdamW fresh_opt(fresh.params(), AdamWConfig{});
  testing::internal::CaptureStderr();
  auto back = resume_training_checkpoint(dir, fresh, fresh_opt);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->step, 1);
  EXPECT_NE(err.find("warning: skipping checkpoint " + newest + ": " + newest + "/manifest.json is missing"),
            std::string::npos) << err;
  EXPECT_EQ(err.find("step_5"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

// Rotation keeps the newest `keep` usable checkpoints: one that resume found unusable is neither
// counted nor deleted (it used to count, so a valid older one was deleted in its place).
TEST(TrainCheckpoint, RotationNeitherCountsNorDeletesAnUnusableCheckpoint) {
  const std::string dir = fresh_dir("rotation_unusable");
  Esm2Model model(testkit::tiny_esm2_config(), Device::CPU);
  model.params().init(1);
  AdamW opt(model.params(), AdamWConfig{});
  for (int64_t s : {2, 4, 6}) save_training_checkpoint(dir, {s, uint64_t(s) * 10, "", ""}, model, opt, 0);
  fs::rename(dir + "/step_6", dir + "/step_7");  // its trainer state says step 6: unusable
  testing::internal::CaptureStderr();
  auto back = resume_training_checkpoint(dir, model, opt);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->step, 4);
  EXPECT_NE(err.find("step_7: "), std::string::npos) << err;
  EXPECT_NE(err.find("(left in place; checkpoint rotation does not count it)"), std::string::npos) << err;
  save_training_checkpoint(dir, {6, 60, "", ""}, model, opt, 2);
  save_training_checkpoint(dir, {8, 80, "", ""}, model, opt, 2);
  std::vector<std::string> left;
  for (const auto& [step, d] : list_checkpoints(dir)) left.push_back(fs::path(d).filename().string());
  EXPECT_EQ(left, (std::vector<std::string>{"step_6", "step_7", "step_8"}));
}

// An unwritable checkpoint directory is found when training starts, not at the first save.
TEST(TrainCheckpoint, ProbeFindsAnUnwritableDirectory) {
  const std::string dir = fresh_dir("probe");
  fs::create_directories(dir);
  EXPECT_NO_THROW(probe_checkpoint_dir(dir));
  EXPECT_TRUE(fs::is_empty(dir));
  try {
    probe_checkpoint_dir("/proc");  // (no one, root included, creates a directory there)
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the checkpoint directory /proc (checkpoint.ckpt_dir"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("is not writable: cannot create directory '/proc/.tmp_step_probe."),
              std::string::npos) << e.what();
  }
}

// A resumed run's changed training settings, one note each (only seed and dataset.path had one).
TEST(TrainCheckpoint, ResumeDifferencesNameChangedHyperParameters) {
  const std::string saved =
      "seed: 1\nnum_train_steps: 6\noptimizer:\n  lr: 0.001\n  betas: [0.9, 0.98]\n  weight_decay: 0.01\n"
      "scheduler:\n  type: warmup_linear\n  warmup_steps: 2\n  min_lr_ratio: 0.1\n"
      "dataset:\n  path: a.fasta\n  packing: thd\n  max_tokens_per_batch: 512\n  micro_batch_size: 8\n"
      "  mlm_probability: 0.15\n";
  EXPECT_TRUE(resume_differences(saved, saved).empty());
  std::string now = saved;
  auto set = [&](const std::string& from, const std::string& to) { now.replace(now.find(from), from.size(), to); };
  set("lr: 0.001", "lr: 0.01");
  set("[0.9, 0.98]", "[0.9, 0.95]");
  set("num_train_steps: 6", "num_train_steps: 20");
  set("warmup_steps: 2", "warmup_steps: 10");
  set("max_tokens_per_batch: 512", "max_tokens_per_batch: 2048");
  set("micro_batch_size: 8", "micro_batch_size: 4");  // (thd: unused)
  set("mlm_probability: 0.15", "mlm_probability: 0.2");
  const std::vector<std::string> d = resume_differences(saved, now);
  auto has = [&](const std::string& text) {
    return std::any_of(d.begin(), d.end(), [&](const std::string& x) { return x.rfind(text, 0) == 0; });
  };
  EXPECT_TRUE(has("optimizer.lr=0.01 here, 0.001 in the checkpoint's run: the updates from here on use it"));
  EXPECT_TRUE(has("optimizer.betas=[0.9, 0.95] here, [0.9, 0.98] in the checkpoint's run"));
  EXPECT_TRUE(has("num_train_steps=20 here, 6 in the checkpoint's run: the learning-rate schedule is recomputed"));
  EXPECT_TRUE(has("scheduler.warmup_steps=10 here, 2 in the checkpoint's run: the learning-rate schedule"));
  EXPECT_TRUE(has("dataset.max_tokens_per_batch=2048 here, 512 in the checkpoint's run: the batches"));
  EXPECT_TRUE(has("dataset.mlm_probability=0.2 here, 0.15 in the checkpoint's run"));
  EXPECT_FALSE(has("dataset.micro_batch_size")) << "bshd only";
  EXPECT_EQ(d.size(), 6u);
  // A constant schedule does not depend on num_train_steps (or min_lr_ratio).
  std::string constant = saved, constant_now = saved;
  constant.replace(constant.find("warmup_linear"), 13, "constant");
  constant_now.replace(constant_now.find("warmup_linear"), 13, "constant");
  constant_now.replace(constant_now.find("num_train_steps: 6"), 18, "num_train_steps: 9");
  constant_now.replace(constant_now.find("min_lr_ratio: 0.1"), 17, "min_lr_ratio: 0.5");
  EXPECT_TRUE(resume_differences(constant, constant_now).empty());
}
