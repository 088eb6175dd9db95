// End-to-end checks of walk-through C's findings: eval/score follow the case convention a DNA
// model was trained with (dataset.uppercase_labels, recorded in its config.json, or
// --uppercase-labels); outputs that name an input or each other, contradictory window flags and
// split fractions are usage errors; prepare removes a killed run's temporaries and warns about
// empty splits; column flags where no input has columns get a note; duplicate record names too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"
#include "biofm/models/uppercase_labels.h"
#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm;
using testkit::RunResult;
using testkit::src;

namespace {

RunResult run(const std::string& args) { return testkit::run_biofm_one_process(args); }
std::string dir(const std::string& name) { return testkit::fresh_dir("io_" + name); }
const std::string kEsm = src("tests/fixtures/esm2_tiny"), kLlama = src("tests/fixtures/llama_tiny");
bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

nlohmann::json json_of(const RunResult& r) { return nlohmann::json::parse(r.output.substr(r.output.find('{'))); }

// A copy of the tiny Llama model directory.
std::string llama_copy(const std::string& to) {
  fs::create_directories(to);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(kLlama + "/" + f, to + "/" + f);
  return to;
}

// The pid of a process that has exited.
long dead_pid() {
  const RunResult r = testkit::sh("sh -c 'echo $$'");
  return std::stol(r.output);
}

}  // namespace

// A model trained with dataset.uppercase_labels=true scores a/c/g/t as A/C/G/T: the export
// records it, eval and score read it, --uppercase-labels overrides; without the key, as before.
TEST(InputsOutputsCli, EvalAndScoreFollowTheModelsUppercaseLabels) {
  const std::string d = dir("uppercase");
  write_file_atomic(d + "/lower.fa", ">s1\nacgtacggtaccgtaNNacgtttgcaACGTAcgatcgatcgatcgtagctagcatgc\n>s2\nggcatcgatcgatcga\n");
  const std::string plain = llama_copy(d + "/plain"), upper = llama_copy(d + "/upper");
  record_uppercase_labels(upper, true);
  EXPECT_EQ(recorded_uppercase_labels(upper), std::optional<bool>(true));
  EXPECT_EQ(recorded_uppercase_labels(plain), std::nullopt);
  const auto eval = [&](const std::string& model, const std::string& extra) {
    RunResult r = run("eval --model " + model + " --input " + d + "/lower.fa --device cpu " + extra);
    EXPECT_EQ(r.code, 0) << r.output;
    return r;
  };
  const RunResult as_before = eval(plain, ""), asked = eval(plain, "--uppercase-labels true"),
                  recorded = eval(upper, ""), overridden = eval(upper, "--uppercase-labels false");
  const nlohmann::json a = json_of(as_before), b = json_of(asked), c = json_of(recorded), e = json_of(overridden);
  EXPECT_EQ(a["uppercase_labels"], false);
  EXPECT_EQ(c["uppercase_labels"], true);
  EXPECT_EQ(a["num_scored_tokens"], b["num_scored_tokens"]);
  EXPECT_NE(a["loss"], b["loss"]);  // other targets
  EXPECT_EQ(b["loss"], c["loss"]);
  EXPECT_EQ(a["loss"], e["loss"]);
  // One note when lowercase bases are scored as their own tokens.
  EXPECT_TRUE(has(as_before.output, "note: ")) << as_before.output;
  EXPECT_TRUE(has(as_before.output, "lowercase (soft-masked) a/c/g/t bases are scored as their own tokens"));
  EXPECT_FALSE(has(recorded.output, "soft-masked")) << recorded.output;
  // score and its track follow the same convention.
  const auto score = [&](const std::string& model, const std::string& extra) {
    RunResult r = run("score --model " + model + " --input " + d + "/lower.fa --device cpu " + extra);
    EXPECT_EQ(r.code, 0) << r.output;
    return r.output.substr(r.output.find("name\t"));
  };
  EXPECT_EQ(score(upper, ""), score(plain, "--uppercase-labels true"));
  EXPECT_NE(score(upper, ""), score(upper, "--uppercase-labels false"));
  EXPECT_EQ(run("eval --model " + plain + " --input " + d + "/lower.fa --device cpu --uppercase-labels yes").code, 2);
  EXPECT_EQ(run("score --model " + kEsm + " --input " + d + "/lower.fa --device cpu --uppercase-labels true").code, 2);
}

// --output naming --input (after normalising the path), or --output and --track naming one file:
// usage errors before any work; the input is left as it was.
TEST(InputsOutputsCli, OutputsThatNameAnInputOrEachOtherAreUsageErrors) {
  const std::string d = dir("same_paths");
  const std::string fa = d + "/in.fa", text = ">x\nACGTACGTACGTAGCTAGCTAGCATCGATCGA\n";
  write_file_atomic(fa, text);
  const auto usage = [&](const std::string& args, const std::string& message) {
    RunResult r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, message)) << args << "\n" << r.output;
    EXPECT_EQ(read_file(fa), text) << args;
  };
  const std::string llama = "--model " + kLlama + " --device cpu --input " + fa;
  usage("score " + llama + " --output " + d + "/./in.fa", "--output names an input file");
  usage("eval " + llama + " --output " + d + "/../" + fs::path(d).filename().string() + "/in.fa",
        "--output names an input file");
  usage("embed " + llama + " --output " + fa, "--output names an input file");
  usage("score " + llama + " --output " + d + "/same.tsv --track " + d + "/./same.tsv",
        "--output and --track name the same file");
  EXPECT_FALSE(fs::exists(d + "/same.tsv"));
}

// Contradictory window flags of embed, and split fractions summing past 1: usage errors (exit 2),
// with one "prepare:" at most.
TEST(InputsOutputsCli, ContradictoryFlagsAreUsageErrors) {
  const std::string d = dir("contradictions");
  write_file_atomic(d + "/in.fa", ">x\nACGTACGTACGTAGCTAGCTAGCATCGATCGA\n");
  const std::string embed = "embed --model " + kLlama + " --device cpu --input " + d + "/in.fa --output " + d + "/e";
  RunResult both = run(embed + " --window 20 --no-window");
  EXPECT_EQ(both.code, 2) << both.output;
  EXPECT_TRUE(has(both.output, "--window and --no-window exclude each other")) << both.output;
  RunResult stride = run(embed + " --max-seq-length 20 --stride 4");
  EXPECT_EQ(stride.code, 2) << stride.output;
  EXPECT_TRUE(has(stride.output, "--stride applies with windows")) << stride.output;
  RunResult fractions = run("prepare --input " + d + "/in.fa --output " + d + "/p --family llama --val-fraction 0.6 "
                            "--test-fraction 0.6");
  EXPECT_EQ(fractions.code, 2) << fractions.output;
  EXPECT_TRUE(has(fractions.output, "--val-fraction and --test-fraction must sum to at most 1")) << fractions.output;
  EXPECT_FALSE(has(fractions.output, "error: prepare:")) << fractions.output;
}

// A killed prepare's temporaries (NAME.tmp.<pid> of a dead process) are removed by the next run
// into the directory, which says how many; one of a live process stays. A split that was asked
// for and got no record is warned about.
TEST(InputsOutputsCli, PrepareRemovesAKilledRunsTemporariesAndWarnsAboutEmptySplits) {
  const std::string d = dir("prepare_tmp");
  write_file_atomic(d + "/one.fa", ">genome\nACGTACGTACGTAGCTAGCTAGCATCGATCGA\n");
  const std::string out = d + "/p";
  const std::string prepare = "prepare --quiet --family llama --input " + d + "/one.fa --output " + out;
  RunResult first = run(prepare);
  ASSERT_EQ(first.code, 0) << first.output;
  const std::string dead = out + "/val-00000-0000.shard.tmp." + std::to_string(dead_pid()),
                    dead_part = out + "/.parts/00000.json.tmp." + std::to_string(dead_pid()),
                    live = out + "/train-00000-0000.shard.tmp." + std::to_string(::getpid());
  for (const std::string& f : {dead, dead_part, live}) write_file_atomic(f, "partial");
  RunResult again = run(prepare);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_TRUE(has(again.output, "prepare: removed 2 temporary files left in " + out + " by a run that was killed"))
      << again.output;
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(dead_part));
  EXPECT_TRUE(fs::exists(live));
  fs::remove(live);
  // One record: a val fraction of 0.99 or 0.01 leaves one of train and val empty.
  RunResult most = run(prepare + " --val-fraction 0.99"), few = run(prepare + " --val-fraction 0.01");
  ASSERT_EQ(most.code, 0) << most.output;
  ASSERT_EQ(few.code, 0) << few.output;
  EXPECT_TRUE(has(most.output, "split is empty: a fraction of")) << most.output;
  EXPECT_TRUE(has(few.output, "split is empty: a fraction of")) << few.output;
  EXPECT_FALSE(has(first.output, "split is empty")) << first.output;  // (no val or test split asked for)
}

// --column / --name-column where no input has columns: a note (FASTA, text, a prepared directory).
TEST(InputsOutputsCli, ColumnFlagsWithoutColumnsGetANote) {
  const std::string d = dir("columns");
  write_file_atomic(d + "/in.fa", ">x\nACGTACGTACGTAGCTAGCTAGCATCGATCGA\n");
  write_file_atomic(d + "/in.txt", "ACGTACGTACGTAGCTAGCTAGCATCGATCGA\n");
  const std::string score = "score --model " + kLlama + " --device cpu --input ";
  for (const std::string& in : {d + "/in.fa", d + "/in.txt"}) {
    RunResult r = run(score + in + " --column foo");
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_TRUE(has(r.output, "note: --column applies to CSV, TSV, JSONL and Parquet inputs; " + in +
                                  " is FASTA or text")) << r.output;
  }
  ASSERT_EQ(run("prepare --quiet --family llama --input " + d + "/in.fa --output " + d + "/p").code, 0);
  RunResult prepared = run(score + d + "/p --name-column id");
  EXPECT_EQ(prepared.code, 0) << prepared.output;
  EXPECT_TRUE(has(prepared.output, "note: --name-column applies to CSV, TSV, JSONL and Parquet inputs; " + d +
                                       "/p is a prepared directory")) << prepared.output;
  RunResult none = run(score + d + "/in.fa");
  EXPECT_FALSE(has(none.output, "note: --")) << none.output;
}

// RNA U in a DNA model's input is context only (only A/C/G/T are scored): counted and warned about
// by eval and score, where it used to pass without a word.
TEST(InputsOutputsCli, RnaBasesAreCountedAsUnscored) {
  const std::string d = dir("rna");
  write_file_atomic(d + "/rna.fa", ">rna\nACGUACGUUAACGT\n>dna\nACGTACGTTAACGT\n");
  const std::string in = " --device cpu --input " + d + "/rna.fa";
  RunResult eval = run("eval --model " + kLlama + in), score = run("score --model " + kLlama + in);
  ASSERT_EQ(eval.code, 0) << eval.output;
  ASSERT_EQ(score.code, 0) << score.output;
  const std::string warning = "warning: 3 U bases (RNA) in 1 record are context only, not scored (only A/C/G/T are)";
  EXPECT_TRUE(has(eval.output, warning)) << eval.output;
  EXPECT_TRUE(has(score.output, warning)) << score.output;
  EXPECT_EQ(json_of(eval)["unscored_u_bases"], 3);
}

// The same record name twice: every output keeps both rows, in input order (safetensors keys are
// tensor names, never record names: nothing is overwritten), and embed, eval and score say so
// once, where they used to give rows that a name could not tell apart without a word.
TEST(InputsOutputsCli, DuplicateRecordNamesAreNoted) {
  const std::string d = dir("duplicate_names");
  write_file_atomic(d + "/in.fa", ">a\nMKTAYIAKQR\n>b\nMKVLAAGIVA\n>a\nMSTNPKPQRK\n>a\nMKV\n");
  const std::string in = " --device cpu --input " + d + "/in.fa";
  const std::string said = "note: " + d + "/in.fa: 1 record name appears more than once; first duplicate: 'a'; rows "
                           "keep input order (match outputs to the input by position, not by name)";
  RunResult one = run("embed --model " + kEsm + in + " --output " + d + "/e.safetensors");
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_TRUE(has(one.output, said)) << one.output;
  EXPECT_EQ(one.output.find("first duplicate"), one.output.rfind("first duplicate")) << "once:\n" << one.output;
  const SafetensorsFile f = read_safetensors(d + "/e.safetensors");
  EXPECT_EQ(nlohmann::json::parse(f.metadata.at("names")), nlohmann::json({"a", "b", "a", "a"}));
  EXPECT_EQ(f.get("embeddings").size(0), 4);
  RunResult npy = run("embed --model " + kEsm + in + " --output " + d + "/npy --output-format npy");
  ASSERT_EQ(npy.code, 0) << npy.output;
  EXPECT_TRUE(has(npy.output, said)) << npy.output;
  EXPECT_EQ(read_file(d + "/npy/names.tsv"), "row\tname\n0\ta\n1\tb\n2\ta\n3\ta\n");
  RunResult score = run("score --model " + kEsm + in + " --output " + d + "/s.tsv");
  ASSERT_EQ(score.code, 0) << score.output;
  EXPECT_TRUE(has(score.output, said)) << score.output;
  RunResult eval = run("eval --model " + kEsm + in);
  ASSERT_EQ(eval.code, 0) << eval.output;
  EXPECT_TRUE(has(eval.output, said)) << eval.output;
  write_file_atomic(d + "/unique.fa", ">a\nMKTAYIAKQR\n>b\nMKV\n");
  RunResult unique = run("embed --model " + kEsm + " --device cpu --input " + d + "/unique.fa --output " + d + "/u.safetensors");
  ASSERT_EQ(unique.code, 0) << unique.output;
  EXPECT_FALSE(has(unique.output, "more than once")) << unique.output;
}
