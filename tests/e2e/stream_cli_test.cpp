// End-to-end: `biofm train dataset.streaming=true` (data/stream.h): unshuffled it trains on the
// batches the in-memory path builds, shuffled it resumes bit for bit, Llama windows stream too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm::testkit;

namespace {

std::string tiny_esm(const std::string& out, const std::string& extra, int steps) {
  return "train --config-dir " + src("configs") + " --config-name esm2_sanity output_dir=" + out +
         " dataset.path=" + src("data/proteins_sample.fasta") + " dataset.val_path= dataset.val_every_n_steps=0"
         " model.config.hidden_size=32 model.config.num_hidden_layers=1 model.config.num_attention_heads=4"
         " model.config.intermediate_size=64 dataset.max_seq_length=128 dataset.max_tokens_per_batch=512"
         " logger.frequency=1 checkpoint.save_every_n_steps=2 scheduler.warmup_steps=1 num_train_steps=" +
         std::to_string(steps) + " " + extra;
}

}  // namespace

TEST(E2eStream, UnshuffledStreamTrainsLikeTheInMemoryFileAndShuffledResumes) {
  const std::string mem = fresh_dir("stream_mem"), str = fresh_dir("stream_str"), shuf = fresh_dir("stream_shuf");
  RunResult a = run_biofm(tiny_esm(mem, "dataset.shuffle=false", 4));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm(tiny_esm(str, "dataset.shuffle=false dataset.streaming=true", 4));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("streamed from 1 file, shuffle buffer off"), std::string::npos) << b.output;
  ASSERT_EQ(losses(mem).size(), 4u);
  EXPECT_EQ(losses(mem), losses(str)) << "file order both ways, masks keyed by the cursor: the same batches";

  // The recipes' key name is read as ours, and the run says so.
  RunResult hf = run_biofm(tiny_esm(fresh_dir("stream_hf_keys"), "dataset.load_dataset_kwargs.streaming=true", 1));
  EXPECT_EQ(hf.code, 0) << hf.output;
  EXPECT_NE(hf.output.find("note: read 'dataset.load_dataset_kwargs.streaming' (override "
                           "'dataset.load_dataset_kwargs.streaming=true', the recipes' name) as dataset.streaming=true"),
            std::string::npos) << hf.output;
  EXPECT_NE(hf.output.find("streamed from 1 file"), std::string::npos) << hf.output;

  // Shuffled through a buffer, then resumed from the step-2 checkpoint.
  const std::string shuffled = "dataset.streaming=true dataset.shuffle_buffer=64";
  RunResult c = run_biofm(tiny_esm(shuf, shuffled, 4));
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("shuffle buffer 64"), std::string::npos) << c.output;
  const auto full = losses(shuf);
  ASSERT_EQ(full.size(), 4u);
  EXPECT_NE(full, losses(str));
  fs::remove_all(shuf + "/checkpoints/step_4");
  RunResult d = run_biofm(tiny_esm(shuf, shuffled, 4));
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.output.find("resumed from"), std::string::npos) << d.output;
  EXPECT_EQ(losses(shuf), full);

  // A blend is sampled at random: streaming refuses it, saying what to do.
  RunResult e = run_biofm(tiny_esm(fresh_dir("stream_blend"), "dataset.streaming=true dataset.path=" +
                                   src("data/proteins_sample.fasta") + "," + src("data/proteins_val.fasta") +
                                   " dataset.weights=[1,1]", 1));
  EXPECT_EQ(e.code, 1) << e.output;
  EXPECT_NE(e.output.find("dataset.streaming does not take a blend"), std::string::npos) << e.output;
}

TEST(E2eStream, LlamaWindowsStream) {
  const std::string out = fresh_dir("stream_llama");
  RunResult r = run_biofm("train --config-dir " + src("configs") + " --config-name llama3_sanity output_dir=" + out +
                          " dataset.path=" + src("data/dna_sample.fasta") +
                          " dataset.val_path= dataset.val_every_n_steps=0 num_train_steps=2 logger.frequency=1"
                          " dataset.streaming=true dataset.shuffle_buffer=16");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("streamed from 1 file, shuffle buffer 16"), std::string::npos) << r.output;
  const auto l = losses(out);
  ASSERT_EQ(l.size(), 2u);
  for (double x : l) EXPECT_TRUE(x > 0 && x < 10) << x;
}
