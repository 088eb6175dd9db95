// End-to-end Llama: the biofm binary trains a tiny genomic causal LM, then generates from and
// evaluates the exported Hugging Face directory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"
#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm;

namespace {

using biofm::testkit::read_metrics;
using biofm::testkit::RunResult;
using biofm::testkit::src;
// (stdout alone, without stderr, when merge_stderr is false)
RunResult run(const std::string& args, bool merge_stderr = true) {
  if (merge_stderr) return biofm::testkit::run_biofm(args);
  return biofm::testkit::sh("{ " + std::string(BIOFM_BINARY) + " " + args + " 2>/dev/null; }");
}

std::string fresh_dir(const std::string& name) {
  std::string d = testing::TempDir() + "/biofm_e2e_" + name;
  fs::remove_all(d);
  return d;
}

// FASTA records of a generate run: (header, sequence).
std::vector<std::pair<std::string, std::string>> parse_fasta(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> recs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(">", 0) == 0)
      recs.push_back({line, ""});
    else if (!recs.empty())
      recs.back().second += line;
  }
  return recs;
}

}  // namespace

TEST(E2eLlama, TrainGenerateEval) {
  const std::string out = fresh_dir("llama");
  const std::string train = "train --config-dir " + src("configs") + " --config-name llama3_sanity output_dir=" + out +
                    " dataset.path=" + src("data/dna_sample.fasta") + " dataset.val_path=" + src("data/dna_val.fasta") +
                    " dataset.val_every_n_steps=2 dataset.val_max_batches=2 model.config.hidden_size=32"
                    " model.config.num_hidden_layers=2 model.config.num_attention_heads=4"
                    " model.config.num_key_value_heads=2 model.config.intermediate_size=64"
                    " dataset.max_seq_length=128 dataset.stride=16 dataset.max_tokens_per_batch=512"
                    " logger.frequency=1 checkpoint.save_every_n_steps=2 scheduler.warmup_steps=1 num_train_steps=4";
  RunResult t = run(train);
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("llama, 2 layers"), std::string::npos) << t.output;
  auto metrics = read_metrics(out + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_NEAR(metrics[0]["loss"].get<double>(), std::log(256.0), 0.3);  // near-uniform at init
  EXPECT_TRUE(metrics[1].contains("val_loss"));
  for (const auto& m : metrics) EXPECT_TRUE(std::isfinite(m["loss"].get<double>()));
  // Resume from the step-2 checkpoint redoes steps 3 and 4 bit for bit.
  fs::remove_all(out + "/checkpoints/step_4");
  RunResult t2 = run(train);
  ASSERT_EQ(t2.code, 0) << t2.output;
  EXPECT_NE(t2.output.find("resumed from"), std::string::npos) << t2.output;
  auto again = read_metrics(out + "/metrics.jsonl");
  ASSERT_EQ(again.size(), 4u);  // steps 3 and 4 once: their first records are dropped on resume
  for (int i = 0; i < 2; ++i) EXPECT_EQ(again[size_t(2 + i)]["loss"].get<double>(), metrics[size_t(2 + i)]["loss"].get<double>());
  const std::string model = out + "/final_model";
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "special_tokens_map.json"})
    EXPECT_TRUE(fs::exists(model + "/" + f)) << f;
  auto cfg = nlohmann::json::parse(read_file(model + "/config.json"));
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_FALSE(read_safetensors(model + "/model.safetensors").tensors.empty());

  // Generation: greedy, and seeded sampling; the uncached reference path prints the same.
  RunResult g = run("generate --model " + model + " --prompt ACGTTGCAAGGC --max-new-tokens 20", false);
  ASSERT_EQ(g.code, 0) << g.output;
  auto recs = parse_fasta(g.output);
  ASSERT_EQ(recs.size(), 1u) << g.output;
  EXPECT_NE(recs[0].first.find("prompt_length=12"), std::string::npos) << recs[0].first;
  EXPECT_TRUE(recs[0].first.find("stop=eos") != std::string::npos ||
              recs[0].first.find("new_tokens=20 stop=max_new_tokens") != std::string::npos)
      << recs[0].first;
  const std::string sample = "generate --model " + model +
                             " --prompt ACGTTGCAAGGC --max-new-tokens 30 --temperature 1.0 --top-k 8 --seed 3"
                             " --num-samples 2 --ignore-eos";
  RunResult s1 = run(sample, false), s2 = run(sample + " --no-cache", false), s3 = run(sample, false);
  ASSERT_EQ(s1.code, 0) << s1.output;
  EXPECT_EQ(s1.output, s2.output) << "cached and uncached generation differ";
  EXPECT_EQ(s1.output, s3.output) << "generation is not reproducible";
  auto samples = parse_fasta(s1.output);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_NE(samples[0].first.find("new_tokens=30"), std::string::npos) << samples[0].first;
  EXPECT_NE(samples[0].second, samples[1].second);
  // Sampling from the whole softmax of a barely trained byte-level model: only nucleotide codes
  // come out (the other 250 bytes and the special tokens are never picked), unless --any-token.
  const std::string wide = "generate --model " + model +
                           " --prompt ACGTTGCAAGGC --max-new-tokens 60 --temperature 1.5 --num-samples 4 --ignore-eos";
  RunResult ws = run(wide, false);
  ASSERT_EQ(ws.code, 0) << ws.output;
  auto wide_samples = parse_fasta(ws.output);
  ASSERT_EQ(wide_samples.size(), 4u) << ws.output;
  for (const auto& [header, body] : wide_samples) {
    EXPECT_EQ(body.size(), 60u) << header;
    EXPECT_EQ(body.find_first_not_of("ACGTUNRYKMSWBDHVacgtunrykmswbdhv"), std::string::npos) << body;
  }
  RunResult any = run(wide + " --any-token", false);
  ASSERT_EQ(any.code, 0) << any.output;
  std::string any_bodies;
  for (const auto& rec : parse_fasta(any.output)) any_bodies += rec.second;
  EXPECT_NE(any_bodies.find_first_not_of("ACGTUNRYKMSWBDHVacgtunrykmswbdhv"), std::string::npos)
      << "with --any-token a barely trained model was expected to print other bytes too";

  // Evaluation: JSON fields, perplexity = exp(loss), loss = token-weighted per-sequence NLL.
  const std::string json_path = out + "/eval.json";
  RunResult e = run("eval --model " + model + " --input " + src("data/dna_val.fasta") + " --output " + json_path, false);
  ASSERT_EQ(e.code, 0) << e.output;
  auto j = nlohmann::json::parse(e.output);
  EXPECT_EQ(j, nlohmann::json::parse(read_file(json_path)));
  for (const char* k : {"loss", "perplexity", "mean_sequence_nll", "num_scored_tokens", "num_sequences", "num_windows",
                        "max_seq_length", "stride", "sequences"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["num_sequences"], 20);
  EXPECT_EQ(j["max_seq_length"], 512);  // the model's max_position_embeddings (llama3_sanity)
  EXPECT_EQ(j["stride"], 200);
  const double loss = j["loss"].get<double>();
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(loss), 1e-9 * std::exp(loss));
  EXPECT_GT(loss, 0.5);
  EXPECT_LT(loss, 6.0);
  ASSERT_EQ(j["sequences"].size(), 20u);
  double nll = 0;
  int64_t scored = 0;
  for (const auto& r : j["sequences"]) {
    for (const char* k : {"name", "length", "num_scored", "mean_nll"}) EXPECT_TRUE(r.contains(k)) << k;
    EXPECT_LE(r["num_scored"].get<int64_t>(), r["length"].get<int64_t>());
    nll += r["mean_nll"].get<double>() * double(r["num_scored"].get<int64_t>());
    scored += r["num_scored"].get<int64_t>();
  }
  EXPECT_EQ(scored, j["num_scored_tokens"].get<int64_t>());
  EXPECT_NEAR(nll / double(scored), loss, 1e-9);

  // Short overlapping windows score every base once too: same scored count, more windows.
  RunResult w = run("eval --model " + model + " --input " + src("data/dna_val.fasta") +
                        " --max-seq-length 128 --stride 32",
                    false);
  ASSERT_EQ(w.code, 0) << w.output;
  auto jw = nlohmann::json::parse(w.output);
  EXPECT_EQ(jw["num_scored_tokens"], j["num_scored_tokens"]);
  EXPECT_GT(jw["num_windows"].get<int64_t>(), 20 * 10);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(jw["sequences"][i]["num_scored"], j["sequences"][i]["num_scored"]);

  // Bad invocations fail clearly.
  RunResult b1 = run("generate --model " + model + " --prompt ACGT --top-k -1");
  EXPECT_NE(b1.code, 0);
  EXPECT_NE(b1.output.find("--top-k"), std::string::npos) << b1.output;
  RunResult b2 = run("eval --model " + model + " --input " + src("data/dna_val.fasta") + " --stride 200 --max-seq-length 100");
  EXPECT_NE(b2.code, 0);
  EXPECT_NE(b2.output.find("--stride"), std::string::npos) << b2.output;
}

// fp8_config on the CPU: the emulated FP8 reference (the same quantization as the GPU's FP8
// GEMMs, then fp32 math) trains; the banner says so, and its losses differ from fp32's.
TEST(E2eLlama, Fp8EmulatedTrainingOnCpu) {
  const std::string base = "train --config-dir " + src("configs") + " --config-name llama3_sanity" +
                           " dataset.path=" + src("data/dna_sample.fasta") +
                           " model.config.hidden_size=32 model.config.num_hidden_layers=2"
                           " model.config.num_attention_heads=2 model.config.num_key_value_heads=1"
                           " model.config.intermediate_size=64 dataset.max_seq_length=256 dataset.stride=16"
                           " dataset.max_tokens_per_batch=1024 logger.frequency=1 checkpoint.save_every_n_steps=0"
                           " checkpoint.save_final_model=false scheduler.warmup_steps=2 num_train_steps=12"
                           " dataset.val_path= dataset.val_every_n_steps=0 optimizer.lr=1e-2";
  const std::string out8 = fresh_dir("llama_fp8"), out32 = fresh_dir("llama_fp32");
  RunResult t8 = run(base + " output_dir=" + out8 + " fp8_config.enabled=true");
  ASSERT_EQ(t8.code, 0) << t8.output;
  EXPECT_NE(t8.output.find("FP8 HYBRID emulated"), std::string::npos) << t8.output;
  RunResult t32 = run(base + " output_dir=" + out32);
  ASSERT_EQ(t32.code, 0) << t32.output;
  auto m8 = read_metrics(out8 + "/metrics.jsonl"), m32 = read_metrics(out32 + "/metrics.jsonl");
  ASSERT_EQ(m8.size(), 12u);
  ASSERT_EQ(m32.size(), 12u);
  EXPECT_LT(m8.back()["loss"].get<double>(), m8.front()["loss"].get<double>() - 0.2) << "FP8 loss did not fall";
  EXPECT_NE(m8[1]["loss"].get<double>(), m32[1]["loss"].get<double>()) << "fp8_config had no effect";
  for (size_t i = 0; i < m8.size(); ++i)  // the recipes' FP8-vs-bf16 tolerance
    EXPECT_NEAR(m8[i]["loss"].get<double>(), m32[i]["loss"].get<double>(), 0.05 * m32[i]["loss"].get<double>()) << i;
  RunResult bad = run(base + " output_dir=" + out8 + " fp8_config.fp8_recipe=Float8CurrentScalin");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("Float8CurrentScaling"), std::string::npos) << bad.output;
}
