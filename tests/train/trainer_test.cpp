// The training loop: validation runs every dataset.val_every_n_steps whatever
// logger.frequency is, and every record reaches metrics.jsonl once; the recipes' metric names and
// their FP8 statistics switch (quant_stats_config).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "biofm/models/uppercase_labels.h"
#include "biofm/train/metrics.h"
#include "biofm/train/trainer.h"

using namespace biofm;

// The divergence warning names what is non-finite: a finite loss beside a NaN grad norm is not
// "non-finite loss".
TEST(Trainer, NonFiniteTextNamesWhichValue) {
  EXPECT_EQ(nonfinite_text(4.6966e16, NAN), "non-finite grad norm nan (loss 4.6966e+16)");
  EXPECT_EQ(nonfinite_text(NAN, 0.5), "non-finite loss nan (grad norm 0.5)");
  EXPECT_EQ(nonfinite_text(INFINITY, -NAN), "non-finite loss inf and grad norm -nan");
}

TEST(Trainer, ValidationFollowsItsOwnSchedule) {
  const std::string src = BIOFM_SOURCE_DIR;
  const std::string out = testing::TempDir() + "/trainer_val_schedule";
  std::filesystem::remove_all(out);
  TrainConfig cfg = load_train_config(src + "/configs", "esm2_sanity",
                                      {"num_train_steps=6", "logger.frequency=4", "dataset.val_every_n_steps=3",
                                       "dataset.val_max_batches=1", "model.config.hidden_size=32",
                                       "model.config.num_hidden_layers=1", "model.config.intermediate_size=64",
                                       "dataset.max_tokens_per_batch=512", "dataset.max_seq_length=64",
                                       "checkpoint.save_every_n_steps=0", "checkpoint.save_final_model=false",
                                       "dataset.path=" + src + "/data/proteins_sample.fasta",
                                       "dataset.val_path=" + src + "/data/proteins_val.fasta", "output_dir=" + out});
  run_training(cfg);
  std::ifstream in(out + "/metrics.jsonl");
  std::vector<int64_t> val_steps, log_steps;
  std::string line;
  while (std::getline(in, line)) {
    auto r = nlohmann::json::parse(line);
    if (r.contains("val_loss")) val_steps.push_back(r["step"].get<int64_t>());
    if (r.contains("loss")) log_steps.push_back(r["step"].get<int64_t>());
    EXPECT_FALSE(r.contains("train/mfu_pct")) << "log_mfu is off";
  }
  EXPECT_EQ(val_steps, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(log_steps, (std::vector<int64_t>{4, 6}));
}

// The recipes' quant_stats_config as they write it turns the FP8 statistics on at the freq of the
// LogFp8TensorStats entries of quant_stats_file; quant_log_dir gets each rank's statistics as
// JSONL; every training record carries the recipes' perf_logger names.
TEST(Trainer, RecipeQuantStatsConfigAndMetricNames) {
  const std::string src = BIOFM_SOURCE_DIR;
  const std::string out = testing::TempDir() + "/trainer_quant_stats";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  {
    std::ofstream f(out + "/fp8_debugging_stats.yaml");
    f << "example_fp8_tensor_stat_collection:\n  enabled: True\n  transformer_engine:\n"
         "    LogFp8TensorStats:\n      enabled: True\n      tensors_struct:\n"
         "      - tensor: activation\n        stats: [underflows%]\n        freq: 2\n";
  }
  TrainConfig cfg = load_train_config(
      src + "/configs", "llama3_sanity",
      {"dataset.path=" + src + "/data/dna_sample.fasta", "model.config.hidden_size=32",
       "model.config.num_hidden_layers=1", "model.config.num_attention_heads=2", "model.config.num_key_value_heads=1",
       "model.config.intermediate_size=64", "dataset.max_seq_length=128", "dataset.stride=16",
       "dataset.max_tokens_per_batch=256", "dataset.val_path=", "dataset.val_every_n_steps=0", "num_train_steps=4",
       "grad_acc_steps=2", "logger.frequency=1", "checkpoint.save_every_n_steps=2", "checkpoint.save_final_model=false",
       "fp8_config.enabled=true", "quant_stats_config.enabled=true",
       "quant_stats_config.quant_stats_file=" + out + "/fp8_debugging_stats.yaml",
       "quant_stats_config.quant_log_dir=quant_logs", "log_mfu=true", "output_dir=" + out});
  run_training(cfg);
  std::vector<nlohmann::json> recs;
  {
    std::ifstream in(out + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) recs.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(recs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json& r = recs[i];
    const int64_t step = int64_t(i) + 1;
    EXPECT_EQ(r["train/global_step"], step);
    EXPECT_DOUBLE_EQ(r["train/perplexity"].get<double>(), std::exp(r["loss"].get<double>()));
    EXPECT_GT(r["train/step_time"].get<double>(), 0.0);
    // Non-pad tokens per optimizer step (both micro batches): unpadded tokens/s x seconds per step.
    const double per_step = r["train/total_unpadded_tokens_per_batch"].get<double>();
    EXPECT_GT(per_step, 0.0);
    EXPECT_NEAR(per_step, r["unpadded_tokens_per_sec"].get<double>() * r["step_time"].get<double>(), 1e-6 * per_step);
    EXPECT_FALSE(r.contains("train/gpu_memory_allocated_max_gb"));  // CPU: no device memory figures
    // log_mfu: the recipes' MFU in percent and TFLOP/s per GPU, from the FLOPs train/mfu counts
    const double mfu = r["train/mfu"].get<double>();
    EXPECT_GT(mfu, 0.0);
    EXPECT_DOUBLE_EQ(r["train/mfu_pct"].get<double>(), 100 * mfu);
    EXPECT_NEAR(r["train/tflops_per_gpu"].get<double>(), mfu * kPeakBf16Flops / 1e12, 1e-9 * kPeakBf16Flops / 1e12);
    EXPECT_EQ(r.contains("fp8/layer_01/qkv/input/amax"), step % 2 == 0) << "step " << step;  // freq 2
  }
  auto quant_steps = [&] {
    std::ifstream q(out + "/quant_logs/rank_0/quant_stats.jsonl");
    EXPECT_TRUE(q.good());
    std::vector<int64_t> steps;
    std::string line;
    while (std::getline(q, line)) {
      const auto r = nlohmann::json::parse(line);
      steps.push_back(r["step"].get<int64_t>());
      EXPECT_EQ(r["rank"], 0);
      EXPECT_TRUE(r.contains("timestamp"));
      EXPECT_EQ(r["fp8/layer_01/qkv/input/amax"], recs[size_t(steps.back() - 1)]["fp8/layer_01/qkv/input/amax"]);
      EXPECT_FALSE(r.contains("loss"));
    }
    return steps;
  };
  EXPECT_EQ(quant_steps(), (std::vector<int64_t>{2, 4}));
  // Resumed from step 2, the redone steps' statistics replace theirs (as metrics.jsonl's records).
  std::filesystem::remove_all(out + "/checkpoints/step_4");
  run_training(cfg);
  EXPECT_EQ(quant_steps(), (std::vector<int64_t>{2, 4}));
}

// A step without label tokens (windows of only N bases) has no loss: logged without one (not as a
// perfect 0.0000), counted, left out of the first/last loss; a run with no target at all warns.
// The export records the run's dataset.uppercase_labels for eval and score.
TEST(Trainer, StepsWithoutTargetsHaveNoLoss) {
  const std::string src = BIOFM_SOURCE_DIR;
  const std::string out = testing::TempDir() + "/trainer_no_targets";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  std::string all_n, mostly_n;
  for (int i = 0; i < 10; ++i) all_n += ">n" + std::to_string(i) + "\n" + std::string(300, 'N') + "\n";
  {
    std::ofstream(out + "/all_n.fa") << all_n;
    std::ofstream(out + "/mostly_n.fa") << all_n.substr(0, 3 * all_n.size() / 10)  // (3 records of N)
                                        << ">g1\nACGTACGTACGGATCGATTACGATCGATCGTAGCTAGCTAGGCTA\n"
                                        << ">g2\nTTGACGATCGGCTAGCTAGCATCGACTAGCATCGACGACTAGCAT\n";
  }
  auto config = [&](const std::string& data, const std::string& run) {
    return load_train_config(
        src + "/configs", "llama3_sanity",
        {"dataset.path=" + data, "model.config.hidden_size=32", "model.config.num_hidden_layers=1",
         "model.config.num_attention_heads=2", "model.config.num_key_value_heads=1", "model.config.intermediate_size=64",
         "dataset.max_seq_length=128", "dataset.stride=16", "dataset.max_tokens_per_batch=256", "dataset.val_path=",
         "dataset.val_every_n_steps=0", "num_train_steps=8", "logger.frequency=1", "checkpoint.save_every_n_steps=0",
         "dataset.uppercase_labels=true", "num_threads=1", "output_dir=" + out + "/" + run});
  };
  testing::internal::CaptureStderr();
  const TrainSummary none = run_training(config(out + "/all_n.fa", "all_n"));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(none.checked_steps, 8);
  EXPECT_EQ(none.no_target_steps, 8);
  EXPECT_NE(err.find("warning: no step of this run had a target token"), std::string::npos) << err;
  std::ifstream in(out + "/all_n/metrics.jsonl");
  std::string line;
  int records = 0;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line);
    ++records;
    EXPECT_FALSE(r.contains("loss")) << line;
    EXPECT_FALSE(r.contains("train/loss")) << line;
    EXPECT_EQ(r["no_target_tokens"], true) << line;
    EXPECT_EQ(r["train/global_step"], r["step"]) << line;
  }
  EXPECT_EQ(records, 8);
  // The export says how its targets were cased (models/uppercase_labels.h).
  EXPECT_EQ(recorded_uppercase_labels(out + "/all_n/final_model"), std::optional<bool>(true));

  const TrainSummary some = run_training(config(out + "/mostly_n.fa", "mostly_n"));
  EXPECT_GT(some.no_target_steps, 0);
  EXPECT_LT(some.no_target_steps, some.checked_steps);
  EXPECT_GT(some.first_loss, 0.5);  // a real step's loss (ln 256 at first), not the 0 of an empty one
  EXPECT_GT(some.last_loss, 0.5);
  std::ifstream in2(out + "/mostly_n/metrics.jsonl");
  int with_loss = 0;
  while (std::getline(in2, line)) {
    const auto r = nlohmann::json::parse(line);
    if (!r.contains("loss")) continue;
    ++with_loss;
    EXPECT_GT(r["loss"].get<double>(), 0.5) << line;
  }
  EXPECT_EQ(with_loss, some.checked_steps - some.no_target_steps);
}

// Residues training learns nothing about are said once per data entry, counted, with a few of
// them: data read into memory as it is loaded (ESM-2: read as <unk>); a stream when its first pass
// over the files ends (DNA: all but A/C/G/T/N, soft-masked lowercase being DNA too). Both used
// to pass without a word, while embed, eval and score warned about the same input.
TEST(Trainer, DataOutsideTheAlphabetIsNotedOnce) {
  const std::string src = BIOFM_SOURCE_DIR;
  const std::string out = testing::TempDir() + "/trainer_alphabet";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  const std::string protein = out + "/odd.fa", dna = out + "/odd_dna.fa";
  std::ofstream(protein) << ">a\nMKTAYJAKQRQISFVKSHFSRQ\n>b\nMKVLAAGIVALLLAAGCSSS\n>c\nMK1JQLLAGVLSRESWQQ\n";
  std::ofstream(dna) << ">a\nACGTacgtnNACGTTAGCTAGCATCGATCGATCAGCTAGCTAGCATCGACTAGC\n"
                     << ">b\nACGTRYACGTTAGCTAGCATCGATCGATCAGCTAGCTAGCATCGACTAGCAAA\n";
  const std::vector<std::string> common = {"model.config.hidden_size=32", "model.config.num_hidden_layers=1",
                                           "model.config.intermediate_size=64", "dataset.val_path=",
                                           "dataset.val_every_n_steps=0", "num_train_steps=3", "num_threads=1",
                                           "checkpoint.save_every_n_steps=0", "checkpoint.save_final_model=false"};
  auto with = [&](std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), common.begin(), common.end());
    return overrides;
  };
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  testing::internal::CaptureStderr();
  run_training(load_train_config(src + "/configs", "esm2_sanity",
                                 with({"dataset.path=" + protein, "dataset.max_seq_length=64",
                                       "dataset.max_tokens_per_batch=128", "output_dir=" + out + "/esm"})));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "note: " + protein + ": 3 residues in 2 records are not in the protein alphabet and read as "
                                            "<unk> (seen: 'J', '1'): context only, never a masked-LM target\n"),
            1u)
      << err;
  testing::internal::CaptureStderr();
  run_training(load_train_config(
      src + "/configs", "llama3_sanity",
      with({"dataset.path=" + dna, "dataset.streaming=true", "dataset.shuffle_buffer=2",
            "model.config.num_attention_heads=2", "model.config.num_key_value_heads=1", "dataset.max_seq_length=128",
            "dataset.stride=16", "dataset.max_tokens_per_batch=256", "output_dir=" + out + "/llama"})));
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "note: " + dna + ": 2 residues in 1 record are not A/C/G/T/N (either case) (seen: 'R', 'Y'): "
                                        "tokens of their own, read as context, never a target\n"),
            1u)
      << err;
}
