// The training loop: validation runs every dataset.val_every_n_steps whatever
// logger.frequency is, and every record reaches metrics.jsonl once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "biofm/train/trainer.h"

using namespace biofm;

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
  }
  EXPECT_EQ(val_steps, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(log_steps, (std::vector<int64_t>{4, 6}));
}
