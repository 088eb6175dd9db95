// The recipes' metric names over ranks (train/metrics.h): `train/total_unpadded_tokens_per_batch`
// is the non-pad tokens of one optimizer step summed over ranks, so 2 ranks x 1 micro batch log
// what 1 rank x 2 micro batches logs; each rank writes its own FP8 statistics under
// quant_stats_config.quant_log_dir.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e/cli_run.h"
#include "free_port.h"

namespace fs = std::filesystem;
using namespace biofm::testkit;

namespace {

std::string tiny_llama(const std::string& out, int grad_acc) {
  return "train --config-dir " + src("configs") + " --config-name llama3_sanity output_dir=" + out +
         " dataset.path=" + src("data/dna_sample.fasta") +
         " model.config.hidden_size=32 model.config.num_hidden_layers=1 model.config.num_attention_heads=2"
         " model.config.num_key_value_heads=1 model.config.intermediate_size=64 dataset.max_seq_length=128"
         " dataset.stride=16 dataset.max_tokens_per_batch=256 dataset.val_path= dataset.val_every_n_steps=0"
         " logger.frequency=1 checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false num_threads=1"
         " fp8_config.enabled=true quant_stats_config.enabled=true fp8_config.stats_interval=2"
         " quant_stats_config.quant_log_dir=quant_logs num_train_steps=4 grad_acc_steps=" +
         std::to_string(grad_acc);
}

}  // namespace

TEST(E2eRecipeMetrics, UnpaddedTokensPerBatchAreSummedOverRanks) {
  const std::string one = fresh_dir("recipe_metrics_one"), two = fresh_dir("recipe_metrics_two");
  RunResult a = run_biofm(tiny_llama(one, 2));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm("launch --nproc-per-node 2 --master 127.0.0.1:" + std::to_string(free_port()) + " " +
                          tiny_llama(two, 1));
  ASSERT_EQ(b.code, 0) << b.output;
  const auto ra = read_metrics(one + "/metrics.jsonl"), rb = read_metrics(two + "/metrics.jsonl");
  ASSERT_EQ(ra.size(), 4u);
  ASSERT_EQ(rb.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rb[i]["world_size"], 2);
    EXPECT_GT(ra[i]["train/total_unpadded_tokens_per_batch"].get<double>(), 0.0);
    EXPECT_EQ(rb[i]["train/total_unpadded_tokens_per_batch"], ra[i]["train/total_unpadded_tokens_per_batch"])
        << "step " << i + 1;
    EXPECT_EQ(rb[i]["train/global_step"], int64_t(i) + 1);
  }
  // Each rank's statistics in its own file, on the steps of the interval.
  for (int rank = 0; rank < 2; ++rank) {
    const auto q = read_metrics(two + "/quant_logs/rank_" + std::to_string(rank) + "/quant_stats.jsonl");
    ASSERT_EQ(q.size(), 2u) << rank;
    EXPECT_EQ(q[0]["step"], 2);
    EXPECT_EQ(q[1]["step"], 4);
    EXPECT_EQ(q[1]["rank"], rank);
    EXPECT_GT(q[1]["fp8/layer_01/qkv/input/amax"].get<double>(), 0.0);
  }
  EXPECT_FALSE(fs::exists(one + "/quant_logs/rank_1"));
}
