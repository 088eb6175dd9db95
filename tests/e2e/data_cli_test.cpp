// End-to-end: `biofm train` on a directory of inputs, `biofm eval` on a glob + file list.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm::testkit;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST(E2eData, TrainOnADirectoryThenEvalOnAGlobList) {
  const std::string data = fresh_dir("data_inputs"), out = fresh_dir("data_run");
  fs::copy_file(src("data/proteins_val.fasta"), data + "/a_val.fasta");
  write(data + "/b_extra.tsv", "Entry\tSequence\nX1\tMKTAYIAKQRQISFVKSHFSRQ\nX2\tMLSPADKTNVKAAWGKVGAHAG\n");
  write(data + "/README.md", "where these came from\n");
  fs::remove_all(out);

  RunResult r = run_biofm(
      "train --config-dir " + src("configs") + " --config-name esm2_sanity output_dir=" + out +
      " dataset.path=" + data + " dataset.val_path= dataset.val_every_n_steps=0"
      " model.config.hidden_size=32 model.config.num_hidden_layers=1 model.config.num_attention_heads=4"
      " model.config.intermediate_size=64 dataset.max_seq_length=128 dataset.max_tokens_per_batch=512"
      " logger.frequency=1 checkpoint.save_every_n_steps=0 scheduler.warmup_steps=1 num_train_steps=2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("| data " + data + ": 202 sequences from 2 files (1 skipped: unknown extension)"),
            std::string::npos)
      << r.output;

  // --input goes through the same loader: a quoted glob and a file, comma-separated.
  RunResult e = run_biofm("eval --model " + out + "/final_model --input '" + data + "/*.tsv," + data +
                          "/a_val.fasta' --max-seq-length 128");
  ASSERT_EQ(e.code, 0) << e.output;
  nlohmann::json j = nlohmann::json::parse(e.output.substr(e.output.find('{')));
  EXPECT_EQ(j["num_sequences"].get<int64_t>(), 202);
  EXPECT_EQ(j["input_files"].get<int64_t>(), 2);

  RunResult none = run_biofm("eval --model " + out + "/final_model --input '" + data + "/*.jsonl'");
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.output.find("no files match '" + data + "/*.jsonl'"), std::string::npos) << none.output;
}
