// End-to-end: `biofm prepare`, then training from the prepared directory (the same losses as
// from the file it came from; resume bit-identical), blends and dataset.on_error from the CLI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm::testkit;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string tiny_esm(const std::string& out, const std::string& data, int steps) {
  return "train --config-dir " + src("configs") + " --config-name esm2_sanity output_dir=" + out +
         " dataset.path=" + data + " dataset.val_path= dataset.val_every_n_steps=0"
         " model.config.hidden_size=32 model.config.num_hidden_layers=1 model.config.num_attention_heads=4"
         " model.config.intermediate_size=64 dataset.max_seq_length=128 dataset.max_tokens_per_batch=512"
         " logger.frequency=1 checkpoint.save_every_n_steps=2 scheduler.warmup_steps=1 num_train_steps=" +
         std::to_string(steps);
}

}  // namespace

TEST(E2ePrepare, TrainingFromPreparedShardsEqualsTrainingFromTheFileAndResumes) {
  const std::string prep = fresh_dir("prep_out"), from_file = fresh_dir("prep_file_run"),
                    from_prep = fresh_dir("prep_prep_run"), resumed = fresh_dir("prep_resumed");
  RunResult p = run_biofm("prepare --input " + src("data/proteins_sample.fasta") + " --output " + prep +
                          " --family esm2 --threads 2 --quiet");
  ASSERT_EQ(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("train 2000 / val 0 / test 0 records"), std::string::npos) << p.output;
  ASSERT_TRUE(fs::exists(prep + "/manifest.json"));

  RunResult a = run_biofm(tiny_esm(from_file, src("data/proteins_sample.fasta"), 4));
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm(tiny_esm(from_prep, prep, 4));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("| data " + prep + ": 2000 sequences ("), std::string::npos) << b.output;
  const auto la = losses(from_file), lb = losses(from_prep);
  ASSERT_EQ(la.size(), 4u);
  EXPECT_EQ(la, lb) << "same records, same token ids, same seed: the same batches";

  // Resume from the step-2 checkpoint: steps 3 and 4 again, bit for bit.
  RunResult c = run_biofm(tiny_esm(resumed, prep, 4));
  ASSERT_EQ(c.code, 0) << c.output;
  fs::remove_all(resumed + "/checkpoints/step_4");
  RunResult d = run_biofm(tiny_esm(resumed, prep, 4));
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.output.find("resumed from"), std::string::npos) << d.output;
  EXPECT_EQ(losses(resumed), lb);

  // The DNA family refuses protein tokens, naming both.
  RunResult wrong = run_biofm("train --config-dir " + src("configs") + " --config-name llama3_sanity output_dir=" +
                              fresh_dir("prep_wrong") + " dataset.path=" + prep + " dataset.val_path=" +
                              " dataset.val_every_n_steps=0 num_train_steps=1");
  EXPECT_EQ(wrong.code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("tokenized with the esm tokenizer, but model.family llama uses the nucleotide tokenizer"),
            std::string::npos)
      << wrong.output;
  // bench-data opens it as training does: the same refusal (it measured nonsense, or called
  // the shards corrupt).
  RunResult bench = run_biofm("bench-data --data " + prep + " --family llama --seconds 0.1");
  EXPECT_EQ(bench.code, 1) << bench.output;
  EXPECT_NE(bench.output.find("tokenized with the esm tokenizer, but --family llama uses the nucleotide tokenizer"),
            std::string::npos)
      << bench.output;
}

TEST(E2ePrepare, BlendAndSkipFromTheCommandLine) {
  const std::string data = fresh_dir("prep_blend_data"), run = fresh_dir("prep_blend_run");
  std::string a, b;
  for (int i = 0; i < 60; ++i) a += ">a" + std::to_string(i) + "\nMKTAYIAKQRQISFVKSHFSRQ" + std::to_string(i) + "\n";
  for (int i = 0; i < 20; ++i) b += "{\"sequence\": \"MLSPADKTNVKAAWGKVG" + std::to_string(i) + "\"}\n";
  b += "{\"sequence\": 7}\n";
  write(data + "/a.fasta", a);
  write(data + "/b.jsonl", b);
  const std::string spec = data + "/a.fasta," + data + "/b.jsonl";
  RunResult fail = run_biofm(tiny_esm(run, spec, 1));
  EXPECT_EQ(fail.code, 1);
  EXPECT_NE(fail.output.find(data + "/b.jsonl:21: field 'sequence' is not a string"), std::string::npos)
      << fail.output;
  RunResult r = run_biofm(tiny_esm(run, spec, 1) + " dataset.on_error=skip 'dataset.weights=[1,3]'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("blend of 2 sources, 80 samples per epoch: " + data + "/a.fasta (weight 1, 20 samples"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1 malformed record(s) skipped (dataset.on_error=skip), the first: " + data +
                          "/b.jsonl:21:"),
            std::string::npos)
      << r.output;
  std::ifstream metrics(run + "/metrics.jsonl");
  std::string first;
  std::getline(metrics, first);
  EXPECT_EQ(nlohmann::json::parse(first)["data_skipped_records"], 1) << first;
  RunResult bad = run_biofm(tiny_esm(run, spec, 1) + " 'dataset.weights=[1]'");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("dataset.weights has 1 weights but dataset.path lists 2 entries"), std::string::npos)
      << bad.output;
}

TEST(E2ePrepare, ClusterSamplingFromTheCommandLine) {
  // UniRef90 members named by their UniRef50 cluster: 60 clusters of 1 to 3 members.
  const std::string dir = fresh_dir("prep_clusters"), prep = dir + "/prep", run = dir + "/run";
  std::string tsv = "Entry\tCluster ID\tSequence\n";
  const std::string aa = "ACDEFGHIKLMNPQRSTVWY";
  for (int c = 0; c < 60; ++c)
    for (int m = 0; m <= c % 3; ++m) {
      std::string seq = "M";
      for (int i = 0; i < 30 + c; ++i) seq += aa[size_t((c * 7 + m * 3 + i * i) % 20)];
      tsv += "U90_" + std::to_string(c) + "_" + std::to_string(m) + "\tUniRef50_" + std::to_string(c) + "\t" + seq + "\n";
    }
  write(dir + "/members.tsv", tsv);
  RunResult p = run_biofm("prepare --input " + dir + "/members.tsv --output " + prep +
                          " --family esm2 --cluster-column 'Cluster ID' --val-fraction 0.2 --quiet");
  ASSERT_EQ(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("prepare: clusters (column Cluster ID): train "), std::string::npos) << p.output;
  RunResult t = run_biofm(tiny_esm(run, prep, 2) + " dataset.val_path=" + prep + " dataset.val_every_n_steps=2");
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("clusters, one member each per epoch"), std::string::npos) << t.output;
  EXPECT_EQ(losses(run).size(), 2u);
}

// What prepare passes over is said: directory entries that are not sequence files, and column
// flags given for FASTA input (which has no columns; its records are named by their headers).
TEST(E2ePrepare, SaysWhatItSkipsAndWhatDoesNotApply) {
  const std::string dir = fresh_dir("prep_remarks");
  std::filesystem::copy_file(src("data/proteins_val.fasta"), dir + "/p.fasta");
  std::ofstream(dir + "/README.md") << "notes\n";
  RunResult r = run_biofm("prepare --input " + dir + " --output " + dir + "_out --family esm2 --name-column id --quiet");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("prepare: 1 directory entry skipped: not a sequence file by its extension"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("note: --name-column applies to CSV, TSV, JSONL and Parquet inputs; " + dir + "/p.fasta is FASTA"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("alphabet"), std::string::npos) << r.output;
  // Residues outside the tokenizer's alphabet: one counted note (training says the same).
  std::ofstream(dir + "/odd.fasta") << ">a\nMKTAYJAKQR\n>b\nMKV\n>c\nMK1JQ\n";
  RunResult odd = run_biofm("prepare --input " + dir + "/odd.fasta --output " + dir + "_odd --family esm2 --quiet");
  ASSERT_EQ(odd.code, 0) << odd.output;
  EXPECT_NE(odd.output.find("note: " + dir + "/odd.fasta: 3 residues in 2 records are not in the protein alphabet and "
                            "read as <unk> (seen: 'J', '1'): context only, never a masked-LM target"),
            std::string::npos)
      << odd.output;
}
