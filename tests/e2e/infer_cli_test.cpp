// End-to-end inference through the binary: embed with layers, pooling and sharded output that
// resumes after a kill; score TSVs (pseudo-log-likelihoods, variants, per-base tracks); the
// warnings of issue 15 (alphabet mismatch, truncation, windows past the context, odd prompts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"
#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm;
using testkit::kOneProcess;
using testkit::RunResult;
using testkit::src;

namespace {

RunResult run(const std::string& args) { return testkit::run_biofm_one_process(args); }
std::string dir(const std::string& name) { return testkit::fresh_dir("infer_" + name); }
const std::string kEsm = src("tests/fixtures/esm2_tiny"), kLlama = src("tests/fixtures/llama_tiny");

std::vector<std::vector<std::string>> tsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string c;
    while (std::getline(ls, c, '\t')) cells.push_back(c);
    rows.push_back(cells);
  }
  return rows;
}

// The first n records of a FASTA file, written to dst (tests stay fast on the CPU).
std::string head_fasta(const std::string& from, int n, const std::string& dst) {
  std::ifstream in(from);
  std::string line, out;
  int records = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '>' && ++records > n) break;
    out += line + "\n";
  }
  write_file_atomic(dst, out);
  return dst;
}

}  // namespace

TEST(InferCli, ShardedEmbedEqualsOneFileAndResumes) {
  const std::string d = dir("shards");
  const std::string input = head_fasta(src("data/proteins_val.fasta"), 40, d + "/in.fasta");
  const std::string common = "embed --model " + kEsm + " --input " + input + " --device cpu --layers 0,-1 --max-tokens 2000";
  RunResult one = run(common + " --output " + d + "/all.safetensors");
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult sharded = run(common + " --output " + d + "/out --shard-size 16");
  ASSERT_EQ(sharded.code, 0) << sharded.output;
  const SafetensorsFile all = read_safetensors(d + "/all.safetensors");
  ASSERT_TRUE(all.has("embeddings.0") && all.has("embeddings.2")) << "layers 0 and -1 (= 2)";
  EXPECT_FALSE(all.has("embeddings"));
  const Tensor& e2 = all.get("embeddings.2");
  const int64_t n = e2.size(0), H = e2.size(1);
  EXPECT_EQ(n, 40);
  const nlohmann::json names = nlohmann::json::parse(all.metadata.at("names"));
  ASSERT_EQ(int64_t(names.size()), n);
  // The shards hold the same rows in the same order (batches differ: fp32 round-off only).
  const nlohmann::json index = nlohmann::json::parse(read_file(d + "/out/index.json"));
  ASSERT_EQ(index["shards"].size(), 3u);  // 16 + 16 + 8
  int64_t row = 0;
  for (const auto& s : index["shards"]) {
    const SafetensorsFile f = read_safetensors(d + "/out/" + s["file"].get<std::string>());
    const Tensor& e = f.get("embeddings.2");
    const nlohmann::json shard_names = nlohmann::json::parse(f.metadata.at("names"));
    for (int64_t i = 0; i < e.size(0); ++i, ++row) {
      EXPECT_EQ(shard_names[size_t(i)], names[size_t(row)]);
      for (int64_t h = 0; h < H; ++h) ASSERT_NEAR(e.f32()[i * H + h], e2.f32()[row * H + h], 1e-5) << row;
    }
  }
  EXPECT_EQ(row, n);
  // A killed run: one shard missing, a temporary left behind. The same command writes only the
  // missing shard.
  const std::string gone = d + "/out/shard-00001.safetensors";
  const auto kept_time = fs::last_write_time(d + "/out/shard-00000.safetensors");
  fs::remove(gone);
  RunResult again = run(common + " --output " + d + "/out --shard-size 16");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("24 records from complete shards"), std::string::npos) << again.output;
  EXPECT_TRUE(fs::exists(gone));
  EXPECT_EQ(fs::last_write_time(d + "/out/shard-00000.safetensors"), kept_time);
  // The same command with its paths spelled otherwise, from another directory, is the same run.
  fs::remove(gone);
  RunResult respelled = testkit::sh("cd " + d + " && " + kOneProcess + BIOFM_BINARY + " embed --model " + kEsm +
                                    "/./ --input ./in.fasta --device cpu --layers 0,-1 --max-tokens 2000 --output out"
                                    " --shard-size 16");
  ASSERT_EQ(respelled.code, 0) << respelled.output;
  EXPECT_NE(respelled.output.find("24 records from complete shards"), std::string::npos) << respelled.output;
  EXPECT_TRUE(fs::exists(gone));
  // Another command into the same directory is refused, not mixed.
  RunResult other = run("embed --model " + kEsm + " --input " + input + " --device cpu --output " + d + "/out --shard-size 16");
  EXPECT_EQ(other.code, 1) << other.output;
  EXPECT_NE(other.output.find("different command"), std::string::npos) << other.output;
}

// Every tensor of two safetensors files equal, bit for bit, and the same names; with
// tolerance > 0 the F32 tensors within tolerance × max(1, the tensor's largest |value|) instead
// (below: batches made differently, whose GEMMs OpenBLAS blocks differently by row count on
// some CPUs; ids and offsets stay exact).
static void expect_same_tensors(const SafetensorsFile& a, const SafetensorsFile& b, const std::string& what,
                                float tolerance = 0) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.has(name)) << what << ": " << name;
    const Tensor& u = b.get(name);
    ASSERT_EQ(t.shape(), u.shape()) << what << ": " << name;
    ASSERT_EQ(t.dtype(), u.dtype()) << what << ": " << name;
    if (tolerance > 0 && t.dtype() == DType::F32) {
      float scale = 1.0f;
      for (int64_t i = 0; i < u.numel(); ++i) scale = std::max(scale, std::abs(u.f32()[i]));
      for (int64_t i = 0; i < t.numel(); ++i) ASSERT_NEAR(t.f32()[i], u.f32()[i], tolerance * scale) << what << ": " << name;
      continue;
    }
    EXPECT_EQ(std::memcmp(t.raw(), u.raw(), size_t(t.nbytes())), 0) << what << ": " << name << " differs";
  }
  EXPECT_EQ(a.metadata.at("names"), b.metadata.at("names")) << what;
}

TEST(InferCli, EmbedReadsTheInputAPieceAtATime) {
  // embed reads --input --shard-size records at a time (a first pass only counts them), never
  // whole. 40 records in two files (17 + 23), in pieces of 7 (six pieces, the last of 5, one of
  // them across the file boundary), give the one-piece run's results in input order: ids and
  // offsets exactly, states, logits and pooled rows to fp32 round-off (pieces batch the records
  // differently: the pooling GEMM sums over a batch's rows, and OpenBLAS blocks the layers' GEMMs
  // by row count differently on some CPUs: 7e-7 of the largest logit on an AMD EPYC). Computed in
  // the same pieces, one file, a shard directory and a resumed directory hold the same bits.
  const std::string d = dir("pieces");
  const std::string all = read_file(head_fasta(src("data/proteins_val.fasta"), 40, d + "/all.fasta"));
  size_t cut = 0;
  for (int k = 0; k < 18; ++k) cut = all.find('>', cut + (k ? 1 : 0));
  write_file_atomic(d + "/a.fasta", all.substr(0, cut));
  write_file_atomic(d + "/b.fasta", all.substr(cut));
  std::vector<std::string> headers;  // the input's record names, in order
  for (size_t at = all.find('>'); at != std::string::npos; at = all.find('>', at + 1))
    headers.push_back(all.substr(at + 1, all.find_first_of(" \n", at) - at - 1));
  ASSERT_EQ(headers.size(), 40u);
  const std::string common = "embed --model " + kEsm + " --input " + d + "/a.fasta," + d +
                             "/b.fasta --device cpu --layers 0,-1 --max-tokens 2000";
  for (const std::string extra : {"", " --per-token --logits"}) {
    const std::string tag = extra.empty() ? "pooled" : "per_token";
    RunResult one = run(common + extra + " --output " + d + "/" + tag + "_one.safetensors");
    ASSERT_EQ(one.code, 0) << one.output;
    EXPECT_NE(one.output.find("embedded 40 sequences from 2 files"), std::string::npos) << one.output;
    RunResult pieces = run(common + extra + " --shard-size 7 --output " + d + "/" + tag + "_7.safetensors");
    ASSERT_EQ(pieces.code, 0) << pieces.output;
    const SafetensorsFile a = read_safetensors(d + "/" + tag + "_one.safetensors"),
                          b = read_safetensors(d + "/" + tag + "_7.safetensors");
    expect_same_tensors(a, b, tag + ": one piece vs pieces of 7", 1e-5f);
    EXPECT_EQ(nlohmann::json::parse(b.metadata.at("names")).get<std::vector<std::string>>(), headers) << tag;
    for (const char* k : {"truncated", "unknown_residues", "windows"}) EXPECT_EQ(a.metadata.at(k), b.metadata.at(k)) << k;
    if (!extra.empty()) {
      const Tensor& off = b.get("offsets");
      EXPECT_EQ(off.numel(), 41);
      EXPECT_EQ(b.get("token_embeddings.2").size(0), off.i64()[40]);
    }
  }
  // A directory of 7-record shards holds the same rows, and resumes after a "kill" that lost
  // shards 2 and 3 (records 14-27: the file boundary at 17 inside) and left a temporary behind.
  const std::string out7 = common + " --shard-size 7 --output " + d + "/dir7";
  RunResult first = run(out7);
  ASSERT_EQ(first.code, 0) << first.output;
  const SafetensorsFile whole = read_safetensors(d + "/pooled_7.safetensors");
  const int64_t H = whole.get("embeddings.2").size(1);
  std::vector<std::string> before;
  for (int k = 0; k < 6; ++k) {
    const std::string shard = d + "/dir7/shard-0000" + std::to_string(k) + ".safetensors";
    before.push_back(read_file(shard));
    const SafetensorsFile f = read_safetensors(shard);
    const Tensor& e = f.get("embeddings.2");
    ASSERT_EQ(e.size(0), k < 5 ? 7 : 5);
    EXPECT_EQ(std::memcmp(e.f32(), whole.get("embeddings.2").f32() + k * 7 * H, size_t(e.nbytes())), 0) << k;
    const auto names = nlohmann::json::parse(f.metadata.at("names")).get<std::vector<std::string>>();
    EXPECT_EQ(names, std::vector<std::string>(headers.begin() + k * 7, headers.begin() + k * 7 + e.size(0))) << k;
  }
  fs::remove(d + "/dir7/shard-00002.safetensors");
  fs::remove(d + "/dir7/shard-00003.safetensors");
  fs::remove(d + "/dir7/index.json");
  write_file_atomic(d + "/dir7/shard-00003.safetensors.tmp.1", "partial");
  RunResult again = run(out7);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("26 records from complete shards"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("14 records in"), std::string::npos) << again.output;
  for (int k = 0; k < 6; ++k)
    EXPECT_EQ(read_file(d + "/dir7/shard-0000" + std::to_string(k) + ".safetensors"), before[size_t(k)]) << k;
  EXPECT_EQ(nlohmann::json::parse(read_file(d + "/dir7/index.json"))["num_records"], 40);
  // NumPy output resumes the same way; names.tsv (written as the pieces are read, finished ones
  // included) lists every record once, in input order.
  const std::string npy7 = common + " --shard-size 7 --output-format npy --output " + d + "/npy7";
  ASSERT_EQ(run(npy7).code, 0);
  const std::string npy_before = read_file(d + "/npy7/embeddings.2.npy");
  auto progress = nlohmann::json::parse(read_file(d + "/npy7/progress.json"));
  ASSERT_EQ(progress["done"].size(), 6u);
  progress["done"] = nlohmann::json::array({0, 7, 35});  // pieces 2, 3 and 4 lost
  write_file_atomic(d + "/npy7/progress.json", progress.dump());
  fs::remove(d + "/npy7/names.tsv");
  RunResult npy_again = run(npy7);
  ASSERT_EQ(npy_again.code, 0) << npy_again.output;
  EXPECT_NE(npy_again.output.find("19 records from complete shards"), std::string::npos) << npy_again.output;
  EXPECT_EQ(read_file(d + "/npy7/embeddings.2.npy"), npy_before);
  const auto rows = tsv(read_file(d + "/npy7/names.tsv"));
  ASSERT_EQ(rows.size(), 41u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(rows[i + 1], (std::vector<std::string>{std::to_string(i), headers[i]}));
}

TEST(InferCli, ScoreAndEvalReadTheInputInPieces) {
  // score reads --chunk records at a time and eval a hidden --chunk: the results do not depend on
  // it (eval's batches span pieces as they spanned records before).
  const std::string d = dir("score_pieces");
  const std::string proteins = head_fasta(src("data/proteins_val.fasta"), 12, d + "/p.fasta");
  const std::string dna = head_fasta(src("data/dna_val.fasta"), 5, d + "/d.fasta");
  auto same = [&](const std::string& args, const char* what) {
    RunResult a = run(args), b = run(args + " --chunk 3");
    ASSERT_EQ(a.code, 0) << a.output;
    ASSERT_EQ(b.code, 0) << b.output;
    if (args.rfind("eval", 0) == 0) {
      EXPECT_EQ(a.output, b.output) << what;
      return;
    }
    // score prints 9 significant digits (float round-trip): the last may show the fp32 round-off
    // of batches made of other records (the CPU's GEMMs block by batch shape).
    const auto ta = tsv(a.output), tb = tsv(b.output);
    ASSERT_EQ(ta.size(), tb.size()) << what;
    for (size_t i = 0; i < ta.size(); ++i) {
      ASSERT_EQ(ta[i].size(), tb[i].size()) << what;
      for (size_t j = 0; j < ta[i].size(); ++j) {
        if (ta[i][j] == tb[i][j]) continue;
        const double x = std::stod(ta[i][j]), y = std::stod(tb[i][j]);
        EXPECT_NEAR(x, y, 1e-6 * std::fabs(x)) << what << " row " << i << " column " << j;
      }
    }
  };
  same("score --model " + kEsm + " --input " + proteins + " --device cpu --max-seq-length 40", "score esm");
  same("score --model " + kLlama + " --input " + dna + " --device cpu --window 64 --track " + d + "/t.tsv", "score llama");
  same("eval --model " + kEsm + " --input " + proteins + " --device cpu --max-tokens 200 --max-seq-length 60", "eval esm");
  same("eval --model " + kLlama + " --input " + dna + " --device cpu --max-seq-length 64 --max-tokens 200", "eval llama");
  RunResult e = run("eval --model " + kEsm + " --input " + proteins + " --device cpu --chunk 3");
  const nlohmann::json j = nlohmann::json::parse(e.output.substr(e.output.find('{')));
  EXPECT_EQ(j["num_sequences"], 12);
}

// score, eval and generate run in one process: as one of several ranks each would do the whole
// job into the same output, so they refuse (a usage error), and say embed is the one that splits.
TEST(InferCli, OneProcessCommandsRefuseToBeOneOfSeveralRanks) {
  const std::string d = dir("one_process");
  const std::string input = head_fasta(src("data/proteins_val.fasta"), 4, d + "/in.fasta");
  const std::string as_rank = kOneProcess + "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 " + BIOFM_BINARY + " ";
  for (const std::string cmd : {"score --model " + kEsm + " --input " + input + " --device cpu --output " + d + "/s.tsv",
                                "eval --model " + kEsm + " --input " + input + " --device cpu",
                                "generate --model " + kLlama + " --prompt ACGT --device cpu"}) {
    RunResult r = testkit::sh(as_rank + cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("runs in one process, but this is rank 1 of 2"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(fs::exists(d + "/s.tsv"));
}

TEST(InferCli, EmbedSplitsShardsOverRanks) {
  // Two processes with the launcher's variables (as `biofm launch --nproc-per-node 2 embed ...`
  // sets them) each write the shards k with k mod 2 == rank; the one that finishes with every
  // shard on disk writes index.json. Same shards, bit for bit, as one process.
  const std::string d = dir("ranks");
  const std::string input = head_fasta(src("data/proteins_val.fasta"), 40, d + "/in.fasta");
  const std::string common = "embed --model " + kEsm + " --input " + input +
                             " --device cpu --layers 0,-1 --max-tokens 2000 --shard-size 8 --max-seq-length 64";
  RunResult one = run(common + " --output " + d + "/one");
  ASSERT_EQ(one.code, 0) << one.output;
  auto rank = [&](int r, const std::string& args) {
    return testkit::sh(kOneProcess + "RANK=" + std::to_string(r) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) +
                       " LOCAL_WORLD_SIZE=2 " + std::string(BIOFM_BINARY) + " " + args);
  };
  RunResult r1 = rank(1, common + " --output " + d + "/two");
  ASSERT_EQ(r1.code, 0) << r1.output;
  EXPECT_NE(r1.output.find("rank 1 of 2: 16 of 40 records"), std::string::npos) << r1.output;  // shards 1 and 3
  EXPECT_FALSE(fs::exists(d + "/two/index.json")) << "shards 0, 2 and 4 are not written yet";
  EXPECT_FALSE(fs::exists(d + "/two/shard-00000.safetensors"));
  EXPECT_NE(r1.output.find("3 of 5 shards are not on disk yet"), std::string::npos) << r1.output;
  RunResult r0 = rank(0, common + " --output " + d + "/two");
  ASSERT_EQ(r0.code, 0) << r0.output;
  EXPECT_NE(r0.output.find("rank 0 of 2: 24 of 40 records"), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("wrote index.json"), std::string::npos) << r0.output;
  const nlohmann::json a = nlohmann::json::parse(read_file(d + "/one/index.json"));
  const nlohmann::json b = nlohmann::json::parse(read_file(d + "/two/index.json"));
  EXPECT_EQ(a["shards"], b["shards"]);
  EXPECT_EQ(b["summary"]["ranks"], 2);
  for (const char* key : {"truncated", "unknown_residues", "windows"}) EXPECT_EQ(a["summary"][key], b["summary"][key]) << key;
  EXPECT_GT(b["summary"]["truncated"].get<int64_t>(), 0) << "64-token cut: some proteins are longer";
  for (const auto& sh : a["shards"]) {
    const std::string f = sh["file"].get<std::string>();
    const SafetensorsFile x = read_safetensors(d + "/one/" + f), y = read_safetensors(d + "/two/" + f);
    for (const char* t : {"embeddings.0", "embeddings.2"}) {
      const Tensor &tx = x.get(t), &ty = y.get(t);
      ASSERT_EQ(tx.shape(), ty.shape()) << f << " " << t;
      EXPECT_EQ(std::memcmp(tx.f32(), ty.f32(), size_t(tx.numel()) * 4), 0) << f << " " << t;
    }
    EXPECT_EQ(x.metadata.at("names"), y.metadata.at("names")) << f;
  }
  // Each rank resumes its own shards; a single file or npy output cannot be split: usage errors.
  RunResult again = rank(1, common + " --output " + d + "/two");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("16 records from complete shards"), std::string::npos) << again.output;
  RunResult file = rank(0, common + " --output " + d + "/x.safetensors");
  EXPECT_EQ(file.code, 2) << file.output;
  EXPECT_NE(file.output.find("needs --output DIR"), std::string::npos) << file.output;
  RunResult npy = rank(0, common + " --output " + d + "/npy --output-format npy");
  EXPECT_EQ(npy.code, 2) << npy.output;
  EXPECT_NE(npy.output.find("--output-format npy is for one process"), std::string::npos) << npy.output;
  // An sbatch script's own variables (SLURM_PROCID=0, SLURM_NTASKS=2, no srun step): one process
  // doing all the work, not rank 0 of 2; inside an srun step (SLURM_STEP_NUM_TASKS) a rank.
  RunResult batch = testkit::sh(kOneProcess + "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_NNODES=1 " + std::string(BIOFM_BINARY) +
                                " " + common + " --output " + d + "/sbatch");
  ASSERT_EQ(batch.code, 0) << batch.output;
  EXPECT_EQ(batch.output.find("rank 0 of 2"), std::string::npos) << batch.output;
  EXPECT_TRUE(fs::exists(d + "/sbatch/index.json"));
  RunResult step = testkit::sh(kOneProcess + "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_NNODES=1 SLURM_STEP_NUM_TASKS=2 " +
                               std::string(BIOFM_BINARY) + " " + common + " --output " + d + "/srun");
  ASSERT_EQ(step.code, 0) << step.output;
  EXPECT_NE(step.output.find("rank 1 of 2"), std::string::npos) << step.output;
  // A one-process directory's index also counts resumed shards (from their metadata).
  fs::remove(d + "/one/shard-00002.safetensors");
  RunResult resumed = run(common + " --output " + d + "/one");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const nlohmann::json c = nlohmann::json::parse(read_file(d + "/one/index.json"));
  for (const char* key : {"truncated", "unknown_residues", "windows"}) EXPECT_EQ(c["summary"][key], a["summary"][key]) << key;
}

// --output-format npy: the same rows as the safetensors file, in one array per layer that a
// numpy user memory-maps, names in names.tsv; resumable like shards.
TEST(InferCli, NpyOutputEqualsSafetensorsAndResumes) {
  const std::string d = dir("npy");
  const std::string input = head_fasta(src("data/proteins_val.fasta"), 20, d + "/in.fasta");
  const std::string common = "embed --model " + kEsm + " --input " + input + " --device cpu --layers 0,-1 --max-tokens 2000";
  RunResult one = run(common + " --output " + d + "/all.safetensors");
  ASSERT_EQ(one.code, 0) << one.output;
  RunResult npy = run(common + " --output " + d + "/npy --output-format npy --shard-size 8");
  ASSERT_EQ(npy.code, 0) << npy.output;
  const SafetensorsFile all = read_safetensors(d + "/all.safetensors");
  const nlohmann::json names = nlohmann::json::parse(all.metadata.at("names"));
  for (const char* layer : {"embeddings.0", "embeddings.2"}) {
    const Tensor& e = all.get(layer);
    const std::string b = read_file(d + "/npy/" + layer + ".npy");
    const size_t hlen = size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8;
    const std::string dict = b.substr(10, hlen);
    EXPECT_NE(dict.find("'descr': '<f4'"), std::string::npos) << dict;
    EXPECT_NE(dict.find("'shape': (20, " + std::to_string(e.size(1)) + ")"), std::string::npos) << dict;
    ASSERT_EQ(b.size() - 10 - hlen, size_t(e.nbytes()));
    const float* got = reinterpret_cast<const float*>(b.data() + 10 + hlen);
    for (int64_t i = 0; i < e.numel(); ++i) ASSERT_NEAR(got[i], e.f32()[i], 1e-5) << layer << " " << i;
  }
  const std::string tsv_text = read_file(d + "/npy/names.tsv");
  const auto rows = tsv(tsv_text);
  ASSERT_EQ(rows.size(), 21u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(rows[i + 1][1], names[i].get<std::string>());
  // A killed run (its last piece not recorded): the same command computes only that piece.
  auto progress = nlohmann::json::parse(read_file(d + "/npy/progress.json"));
  ASSERT_EQ(progress["done"].size(), 3u);  // 8 + 8 + 4
  progress["done"].erase(2);
  write_file_atomic(d + "/npy/progress.json", progress.dump());
  RunResult again = run(common + " --output " + d + "/npy --output-format npy --shard-size 8");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("16 records from complete shards"), std::string::npos) << again.output;
  // Per-token output is ragged: refused as a usage error before any work.
  RunResult ragged = run(common + " --output " + d + "/tok --output-format npy --per-token");
  EXPECT_EQ(ragged.code, 2) << ragged.output;
  EXPECT_NE(ragged.output.find("ragged"), std::string::npos) << ragged.output;
}

TEST(InferCli, EmbedFlagsAndWarnings) {
  const std::string d = dir("flags");
  const std::string proteins = head_fasta(src("data/proteins_val.fasta"), 10, d + "/p.fasta");
  const std::string dna = head_fasta(src("data/dna_val.fasta"), 3, d + "/d.fasta");
  // ESM-2 fed DNA: a warning with the fraction.
  RunResult on_dna = run("embed --model " + kEsm + " --input " + dna + " --device cpu --output " + d +
                         "/dna.safetensors --max-seq-length 64");
  ASSERT_EQ(on_dna.code, 0) << on_dna.output;
  EXPECT_NE(on_dna.output.find("looks like DNA"), std::string::npos) << on_dna.output;
  EXPECT_NE(on_dna.output.find("3 of 3 records were truncated"), std::string::npos) << on_dna.output;
  // A Llama model fed protein.
  RunResult prot = run("embed --model " + kLlama + " --input " + proteins + " --device cpu --output " +
                       d + "/p.safetensors --pooling last");
  ASSERT_EQ(prot.code, 0) << prot.output;
  EXPECT_NE(prot.output.find("this is a DNA model"), std::string::npos) << prot.output;
  EXPECT_EQ(run("embed --model " + kEsm + " --input x --output y --pooling max").code, 2);  // usage
  RunResult bad_layer = run("embed --model " + kEsm + " --input " + proteins + " --output " + d +
                            "/x.safetensors --device cpu --layers 3");
  EXPECT_EQ(bad_layer.code, 1);
  EXPECT_NE(bad_layer.output.find("layers 0 (embeddings) to 2"), std::string::npos) << bad_layer.output;
  EXPECT_EQ(run("embed --model " + kEsm + " --input x --output y --device cuda:x").code, 2);  // usage
  EXPECT_EQ(run("embed --model " + kEsm + " --input x --output y --device cpu --precision bf16").code, 1);
  RunResult fp8_cpu = run("embed --model " + kEsm + " --input x --output y --device cpu --precision fp8");
  EXPECT_EQ(fp8_cpu.code, 1);
  EXPECT_NE(fp8_cpu.output.find("--precision fp8 needs a GPU"), std::string::npos) << fp8_cpu.output;
  // Llama per token with windows: every base once, plus <BOS> and <EOS>.
  RunResult w = run("embed --model " + kLlama + " --input " + dna + " --device cpu --output " + d +
                    "/w.safetensors --pooling none --window 64 --stride 16");
  ASSERT_EQ(w.code, 0) << w.output;
  const SafetensorsFile f = read_safetensors(d + "/w.safetensors");
  EXPECT_FALSE(f.has("embeddings"));
  const Tensor& off = f.get("offsets");
  EXPECT_EQ(f.get("token_embeddings").size(0), off.i64()[off.numel() - 1]);
  EXPECT_NE(w.output.find("windows of 64 tokens"), std::string::npos) << w.output;
}

TEST(InferCli, ScoreTsvs) {
  const std::string d = dir("score");
  const std::string proteins = head_fasta(src("data/proteins_val.fasta"), 8, d + "/p.fasta");
  const std::string dna = head_fasta(src("data/dna_val.fasta"), 3, d + "/d.fasta");
  RunResult pll = run("score --model " + kEsm + " --input " + proteins + " --device cpu --max-seq-length 40 --output " + d + "/pll.tsv");
  ASSERT_EQ(pll.code, 0) << pll.output;
  const auto rows = tsv(read_file(d + "/pll.tsv"));
  ASSERT_EQ(rows.size(), 9u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"name", "length", "scored", "pll", "mean_pll", "pseudo_perplexity", "truncated"}));
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 7u);
    EXPECT_LT(std::stod(rows[i][3]), 0.0);
    EXPECT_NEAR(std::stod(rows[i][5]), std::exp(-std::stod(rows[i][4])), 1e-4 * std::stod(rows[i][5]));
  }
  EXPECT_NE(pll.output.find("truncated to 40 tokens"), std::string::npos) << pll.output;

  write_file_atomic(d + "/wt.fasta", ">wt\nMKTAYIAKQRQISFVKSHFSRQ\n");
  write_file_atomic(d + "/muts.txt", "K2A\nM1L:Y5W\n");
  RunResult v = run("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --mutations " + d + "/muts.txt");
  ASSERT_EQ(v.code, 0) << v.output;
  EXPECT_NE(v.output.find("mutant\tscore\nK2A\t"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("\nM1L:Y5W\t"), std::string::npos) << v.output;
  write_file_atomic(d + "/bad.txt", "K2A\nQ5W\n");
  RunResult bad = run("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --mutations " + d + "/bad.txt");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("bad.txt:2"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("has 'Y' at position 5"), std::string::npos) << bad.output;

  RunResult nll = run("score --model " + kLlama + " --input " + dna + " --device cpu --window 128 --output " +
                      d + "/nll.tsv --track " + d + "/t.bedgraph");
  ASSERT_EQ(nll.code, 0) << nll.output;
  const auto n_rows = tsv(read_file(d + "/nll.tsv"));
  EXPECT_EQ(n_rows[0], (std::vector<std::string>{"name", "length", "scored", "nll", "mean_nll"}));
  int64_t scored = 0;
  for (size_t i = 1; i < n_rows.size(); ++i) scored += std::stoll(n_rows[i][2]);
  const auto track = tsv(read_file(d + "/t.bedgraph"));
  EXPECT_EQ(int64_t(track.size()), scored) << "one bedGraph line per scored base";
  ASSERT_EQ(track[0].size(), 4u);
  EXPECT_EQ(std::stoll(track[0][2]) - std::stoll(track[0][1]), 1);
  EXPECT_LT(std::stod(track[0][3]), 0.0);
}

namespace {

// Significant digits of a number as printed ("-2714.94" has 6).
int significant_digits(const std::string& v) {
  std::string mantissa = v.substr(0, v.find_first_of("eE"));
  mantissa.erase(std::remove_if(mantissa.begin(), mantissa.end(), [](char c) { return !std::isdigit(c); }),
                 mantissa.end());
  return int(mantissa.size() - std::min(mantissa.size(), mantissa.find_first_not_of('0')));
}

}  // namespace

// What score and eval leave out of the numbers is said on stderr: empty records (score writes
// their rows with nan scores, so that rows join the input by position; they had no row),
// residues outside the alphabet (<unk>: context, not scored).
TEST(InferCli, ScoreAndEvalReportEmptyRecordsAndUnknownResidues) {
  const std::string d = dir("score_skips");
  write_file_atomic(d + "/emp.fa", ">a\nMKV\n>empty\n>b\nMKT\n>star\n*\n");
  RunResult e = run("score --model " + kEsm + " --input " + d + "/emp.fa --device cpu --output " + d + "/e.tsv");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("warning: 2 empty records"), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("each keeps its row, with nan scores"), std::string::npos) << e.output;
  const auto rows = tsv(read_file(d + "/e.tsv"));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[1][0], "a");
  EXPECT_EQ(rows[2], (std::vector<std::string>{"empty", "0", "0", "nan", "nan", "nan", "0"}));
  EXPECT_EQ(rows[3][0], "b");
  EXPECT_EQ(rows[3][2], "3");
  EXPECT_NE(rows[3][3], "nan");
  EXPECT_EQ(rows[4], (std::vector<std::string>{"star", "0", "0", "nan", "nan", "nan", "0"}));
  // Unnamed records (a table) are named by their place, which is their row.
  write_file_atomic(d + "/emp.csv", "sequence\nMKV\n\"\"\nMKT\n");
  RunResult c = run("score --model " + kEsm + " --input " + d + "/emp.csv --device cpu --chunk 1 --output " + d +
                    "/c.tsv");
  ASSERT_EQ(c.code, 0) << c.output;
  const auto crows = tsv(read_file(d + "/c.tsv"));
  ASSERT_EQ(crows.size(), 4u) << c.output;
  EXPECT_EQ(crows[2][0], "record:1");
  EXPECT_EQ(crows[2][3], "nan");
  EXPECT_EQ(crows[3][0], "record:2");
  write_file_atomic(d + "/empd.fa", ">a\nACGT\n>e\n>b\nACGTT\n");
  RunResult l = run("score --model " + kLlama + " --input " + d + "/empd.fa --device cpu --output " + d +
                    "/l.tsv --track " + d + "/l.bedgraph");
  ASSERT_EQ(l.code, 0) << l.output;
  EXPECT_NE(l.output.find("warning: 1 empty record "), std::string::npos) << l.output;
  const auto lrows = tsv(read_file(d + "/l.tsv"));
  ASSERT_EQ(lrows.size(), 4u);
  EXPECT_EQ(lrows[1][0], "a");
  EXPECT_EQ(lrows[2], (std::vector<std::string>{"e", "0", "0", "nan", "nan"}));
  EXPECT_EQ(lrows[3][0], "b");
  EXPECT_EQ(lrows[3][2], "5");
  EXPECT_EQ(tsv(read_file(d + "/l.bedgraph")).size(), 9u) << "4 + 5 bases; none for the empty record";
  // eval's per-sequence list follows the input too: the empty record is listed, not evaluated.
  RunResult ev = run("eval --model " + kLlama + " --input " + d + "/empd.fa --device cpu");
  ASSERT_EQ(ev.code, 0) << ev.output;
  EXPECT_NE(ev.output.find("warning: 1 empty record "), std::string::npos) << ev.output;
  const auto evj = nlohmann::json::parse(ev.output.substr(ev.output.find('{')));
  EXPECT_EQ(evj["num_sequences"], 2);
  EXPECT_EQ(evj["skipped_empty_records"], 1);
  ASSERT_EQ(evj["sequences"].size(), 3u);
  EXPECT_EQ(evj["sequences"][1]["name"], "e");
  EXPECT_EQ(evj["sequences"][1]["length"], 0);
  EXPECT_TRUE(evj["sequences"][1]["mean_nll"].is_null());
  EXPECT_EQ(evj["sequences"][2]["num_scored"], 5);

  // '*' inside a protein is <unk>: counted, warned about, and not scored (scored 4 of 5).
  write_file_atomic(d + "/unk.fa", ">m\nMK*TA\n>n\nMKTAYIAKQR\n");
  RunResult u = run("score --model " + kEsm + " --input " + d + "/unk.fa --device cpu --output " + d + "/u.tsv");
  ASSERT_EQ(u.code, 0) << u.output;
  EXPECT_NE(u.output.find("warning: 1 residue in 1 record is not in the model's alphabet and read as <unk>"),
            std::string::npos) << u.output;
  const auto urows = tsv(read_file(d + "/u.tsv"));
  ASSERT_EQ(urows.size(), 3u);
  EXPECT_EQ(urows[1][1], "5");
  EXPECT_EQ(urows[1][2], "4") << "the <unk> residue is context, not scored";
  EXPECT_EQ(urows[2][2], "10");
  RunResult ue = run("eval --model " + kEsm + " --input " + d + "/unk.fa --device cpu");
  ASSERT_EQ(ue.code, 0) << ue.output;
  EXPECT_NE(ue.output.find("warning: 1 residue in 1 record is not in the model's alphabet"), std::string::npos)
      << ue.output;
  EXPECT_EQ(nlohmann::json::parse(ue.output.substr(ue.output.find('{')))["unknown_residues"], 1);
  const std::string proteins = head_fasta(src("data/proteins_val.fasta"), 4, d + "/p.fasta");
  RunResult clean = run("score --model " + kEsm + " --input " + proteins + " --device cpu --max-seq-length 10 --output " +
                        d + "/c.tsv");
  ASSERT_EQ(clean.code, 0) << clean.output;
  EXPECT_EQ(clean.output.find("<unk>"), std::string::npos) << "no warning without unknown residues";
  EXPECT_EQ(clean.output.find("empty record"), std::string::npos);
}

// Flags are checked before anything is written: a bad combination is a usage error (exit 2) with
// nothing on stdout.
TEST(InferCli, ScoreAndEvalRefuseBadFlagCombinationsBeforeWriting) {
  const std::string d = dir("score_flags");
  const std::string dna = head_fasta(src("data/dna_val.fasta"), 2, d + "/d.fasta");
  write_file_atomic(d + "/wt.fasta", ">wt\nMKTAYIAKQRQISFVKSHFSRQ\n");
  write_file_atomic(d + "/muts.txt", "K2A\n");
  auto usage = [&](const std::string& args, const std::string& message) {
    RunResult r = testkit::sh("(" + kOneProcess + std::string(BIOFM_BINARY) + " " + args + " 2>/dev/null)");
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(r.output, "") << args << ": nothing on stdout";
    RunResult both = run(args);
    EXPECT_NE(both.output.find(message), std::string::npos) << args << "\n" << both.output;
  };
  usage("score --model " + kLlama + " --input " + dna + " --device cpu --window 10 --stride 8",
        "--stride (8) must lie in [0, --window - 2 = 8)");
  usage("score --model " + kLlama + " --input " + dna + " --device cpu --stride 300",
        "(the window is the model's max_position_embeddings; --window sets it)");
  usage("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --mutations " + d +
            "/muts.txt --max-seq-length 10",
        "--max-seq-length does not apply with --mutations");
  usage("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --window 10",
        "--window applies to causal LMs (Llama) only");
  usage("eval --model " + kLlama + " --input " + dna + " --device cpu --window 10 --stride 8",
        "--stride (8) must lie in [0, --window - 2 = 8)");
  usage("eval --model " + kLlama + " --input " + dna + " --device cpu --max-seq-length 10 --stride 8",
        "--stride (8) must lie in [0, --max-seq-length - 2 = 8)");
  usage("eval --model " + kLlama + " --input " + dna + " --device cpu --window 10 --max-seq-length 10",
        "--window and --max-seq-length both set the window");
  usage("eval --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --window 10",
        "--window applies to causal LMs (Llama) only");
}

// eval takes --window for a Llama model as score and embed do; --max-seq-length stays its synonym.
TEST(InferCli, EvalTakesWindowForCausalModels) {
  const std::string d = dir("eval_window");
  const std::string dna = head_fasta(src("data/dna_val.fasta"), 2, d + "/d.fasta");
  const std::string eval = "eval --model " + kLlama + " --input " + dna + " --device cpu ";
  RunResult w = run(eval + "--window 40 --stride 10"), m = run(eval + "--max-seq-length 40 --stride 10");
  ASSERT_EQ(w.code, 0) << w.output;
  ASSERT_EQ(m.code, 0) << m.output;
  const auto jw = nlohmann::json::parse(w.output.substr(w.output.find('{'))),
             jm = nlohmann::json::parse(m.output.substr(m.output.find('{')));
  EXPECT_EQ(jw["max_seq_length"], 40);
  EXPECT_EQ(jw["stride"], 10);
  EXPECT_EQ(jw["num_windows"], jm["num_windows"]);
  EXPECT_GT(jw["num_windows"].get<int64_t>(), 2);
  EXPECT_EQ(jw["loss"], jm["loss"]);
}

// Variants: a one-column 'mutant' table, residues among the 20 standard amino acids, scores with
// enough digits to tell close variants apart (float round-trip: 9 significant digits).
TEST(InferCli, ScoreVariantsTablesResiduesAndDigits) {
  const std::string d = dir("score_variants");
  write_file_atomic(d + "/wt.fasta", ">wt\nRSMKTAYIAKQR\n");
  write_file_atomic(d + "/single.csv", "mutant\nR1A\nS2G\nM3L:K4R\n");
  RunResult v = run("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --mutations " + d +
                    "/single.csv --output " + d + "/v.tsv");
  ASSERT_EQ(v.code, 0) << v.output;
  const auto rows = tsv(read_file(d + "/v.tsv"));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1][0], "R1A");
  EXPECT_EQ(rows[3][0], "M3L:K4R");
  int most = 0;
  for (size_t i = 1; i < rows.size(); ++i) most = std::max(most, significant_digits(rows[i][1]));
  EXPECT_EQ(most, 9) << rows[1][1];
  write_file_atomic(d + "/header.csv", "mutant\n");
  RunResult h = run("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --mutations " + d + "/header.csv");
  EXPECT_EQ(h.code, 1);
  EXPECT_NE(h.output.find("header.csv: no mutations"), std::string::npos) << h.output;
  // Nothing is dropped silently: a table row without a mutant is an error naming its line, and
  // an empty record beside the wild type is warned about (the wild type is the one non-empty).
  write_file_atomic(d + "/gap.csv", "mutant,DMS_score\nR1A,0.1\n,0.2\n");
  RunResult g = run("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --mutations " + d + "/gap.csv");
  EXPECT_EQ(g.code, 1) << g.output;
  EXPECT_NE(g.output.find("gap.csv:3: empty mutation"), std::string::npos) << g.output;
  write_file_atomic(d + "/wt2.fasta", ">none\n>wt\nRSMKTAYIAKQR\n");
  RunResult w2 = run("score --model " + kEsm + " --input " + d + "/wt2.fasta --device cpu --mutations " + d +
                     "/single.csv --output " + d + "/v2.tsv");
  ASSERT_EQ(w2.code, 0) << w2.output;
  EXPECT_NE(w2.output.find("warning: 1 empty record"), std::string::npos) << w2.output;
  EXPECT_EQ(read_file(d + "/v2.tsv"), read_file(d + "/v.tsv"));
  for (const char* bad : {"R1-", "R1.", "R1X", "R1B", "R1U", "R1Z", "R1O"}) {
    write_file_atomic(d + "/bad.txt", std::string("S2G\n") + bad + "\n");
    RunResult b = run("score --model " + kEsm + " --input " + d + "/wt.fasta --device cpu --mutations " + d + "/bad.txt");
    EXPECT_EQ(b.code, 1) << bad;
    EXPECT_NE(b.output.find("bad.txt:2: '" + std::string(bad) + "': the mutant residue"), std::string::npos)
        << b.output;
    EXPECT_EQ(b.output.find("mutant\tscore"), std::string::npos) << "no partial output";
  }
}

// --track: bedGraph for .bedgraph / .bdg in any case; anything else (.bed too) is TSV.
TEST(InferCli, ScoreTrackFormatFollowsTheExtensionInAnyCase) {
  const std::string d = dir("score_track");
  const std::string dna = head_fasta(src("data/dna_val.fasta"), 1, d + "/d.fasta");
  for (const std::string name : {"t.BEDGRAPH", "t.bedGraph", "t.Bdg", "t.bedgraph", "t.bed", "t.tsv"}) {
    RunResult r = run("score --model " + kLlama + " --input " + dna + " --device cpu --window 64 --track " + d + "/" +
                      name + " --output " + d + "/nll.tsv");
    ASSERT_EQ(r.code, 0) << r.output;
    const auto track = tsv(read_file(d + "/" + name));
    ASSERT_GT(track.size(), 2u);
    const bool bedgraph = name != "t.bed" && name != "t.tsv";
    if (bedgraph) {
      EXPECT_EQ(track[0].size(), 4u) << name;
      EXPECT_EQ(track[0][1], "0") << name << ": 0-based start";
      EXPECT_EQ(track[0][2], "1") << name;
    } else {
      EXPECT_EQ(track[0], (std::vector<std::string>{"name", "position", "base", "log_likelihood"})) << name;
    }
    EXPECT_GE(significant_digits(track[1].back()), 7) << track[1].back();
  }
  const auto nll = tsv(read_file(d + "/nll.tsv"));
  ASSERT_EQ(nll.size(), 2u);
  EXPECT_GE(significant_digits(nll[1][3]), 8) << nll[1][3];
}

TEST(InferCli, EvalReportsTruncationAndDefaultsToTheContext) {
  const std::string d = dir("eval");
  const std::string proteins = head_fasta(src("data/proteins_val.fasta"), 10, d + "/p.fasta");
  const std::string dna = head_fasta(src("data/dna_val.fasta"), 3, d + "/d.fasta");
  RunResult e = run("eval --model " + kEsm + " --input " + proteins + " --device cpu --max-seq-length 50");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("\"num_truncated\""), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("warning:"), std::string::npos) << e.output;
  RunResult l = run("eval --model " + kLlama + " --input " + dna + " --device cpu");
  ASSERT_EQ(l.code, 0) << l.output;
  const auto json_start = l.output.find('{');
  const nlohmann::json j = nlohmann::json::parse(l.output.substr(json_start));
  const nlohmann::json cfg = nlohmann::json::parse(read_file(kLlama + "/config.json"));
  EXPECT_EQ(j["max_seq_length"], cfg["max_position_embeddings"]);
  RunResult long_w = run("eval --model " + kLlama + " --input " + dna + " --device cpu --max-seq-length " +
                         std::to_string(cfg["max_position_embeddings"].get<int64_t>() * 2));
  EXPECT_NE(long_w.output.find("longer than the model's max_position_embeddings"), std::string::npos) << long_w.output;
}

TEST(InferCli, GenerateRefusesNonNucleotidePrompts) {
  RunResult r = run("generate --model " + kLlama + " --device cpu --prompt ACGTMKVLE --max-new-tokens 2");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("position 8"), std::string::npos) << r.output;
  RunResult f = run("generate --model " + kLlama + " --device cpu --prompt ACGTMKVLE --max-new-tokens 2 --force");
  EXPECT_EQ(f.code, 0) << f.output;
  EXPECT_NE(f.output.find("warning"), std::string::npos) << f.output;
}

TEST(InferCli, PreparedDirectoriesAsInput) {
  // embed / eval of a `biofm prepare` directory read what embed / eval of its source file read.
  const std::string d = dir("prepared");
  const std::string input = head_fasta(src("data/proteins_val.fasta"), 12, d + "/in.fasta");
  ASSERT_EQ(run("prepare --input " + input + " --output " + d + "/prep --family esm2 --quiet").code, 0);
  const std::string embed = "embed --model " + kEsm + " --device cpu --output-format npy --input ";
  RunResult a = run(embed + input + " --output " + d + "/from_file");
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run(embed + d + "/prep --split train --output " + d + "/from_prep");
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_EQ(read_file(d + "/from_prep/embeddings.npy"), read_file(d + "/from_file/embeddings.npy"));
  const auto rows = tsv(read_file(d + "/from_prep/names.tsv"));
  ASSERT_EQ(rows.size(), 13u);
  EXPECT_EQ(rows[1][1], "train:0");

  const std::string eval = "eval --model " + kEsm + " --device cpu --input ";
  RunResult e1 = run(eval + input), e2 = run(eval + d + "/prep");
  ASSERT_EQ(e1.code, 0) << e1.output;
  ASSERT_EQ(e2.code, 0) << e2.output;
  const auto j1 = nlohmann::json::parse(e1.output.substr(e1.output.find('{'))),
             j2 = nlohmann::json::parse(e2.output.substr(e2.output.find('{')));
  EXPECT_EQ(j1.at("loss"), j2.at("loss"));

  RunResult empty = run(eval + d + "/prep --split val");
  EXPECT_EQ(empty.code, 1) << empty.output;
  EXPECT_NE(empty.output.find("split 'val' holds no records"), std::string::npos) << empty.output;
  RunResult wrong = run("eval --model " + kLlama + " --device cpu --input " + d + "/prep");
  EXPECT_EQ(wrong.code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("tokenized with the esm tokenizer, but the model uses the nucleotide tokenizer"), std::string::npos)
      << wrong.output;
  RunResult not_prep = run(eval + input + " --split val");
  EXPECT_EQ(not_prep.code, 1) << not_prep.output;
  EXPECT_NE(not_prep.output.find("--split applies to a prepared directory"), std::string::npos) << not_prep.output;
}
