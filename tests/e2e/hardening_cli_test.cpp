// End-to-end regression tests of issue 15 through the binary: inputs a new user might give
// (bad config.json, Latin-1 FASTA headers, silly flags) end with exit 1 and a message naming
// the file and key, never a crash or "internal error"; training stops cleanly on SIGTERM and
// resumes without duplicate metrics; every resume fallback is said.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"
#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm;
using json = nlohmann::json;

namespace {

using testkit::RunResult;
using testkit::sh;
using testkit::src;
RunResult run(const std::string& args) { return testkit::run_biofm(args); }
std::string fresh_dir(const std::string& name) { return testkit::fresh_dir("hard_" + name); }

// A copy of a fixture model directory with config.json[key] = value.
std::string model_with(const std::string& fixture, const std::string& key, const json& value) {
  const std::string d = fresh_dir("model");
  fs::remove_all(d);
  fs::copy(src("tests/fixtures/" + fixture), d, fs::copy_options::recursive);
  json j = json::parse(read_file(d + "/config.json"));
  j[key] = value;
  write_file_atomic(d + "/config.json", j.dump(2));
  return d;
}

void expect_clean_error(const RunResult& r, const std::vector<std::string>& needles, const std::string& what,
                        int code = 1) {
  EXPECT_EQ(r.code, code) << what << "\n" << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << what << "\n" << r.output;
  for (const std::string& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << what << ": no '" << n << "' in\n" << r.output;
}

std::string tiny_train_args(const std::string& out, int steps) {
  return "train --config-dir " + src("configs") + " --config-name esm2_sanity output_dir=" + out +
         " dataset.path=" + src("data/proteins_sample.fasta") + " dataset.val_path=null dataset.val_every_n_steps=0" +
         " model.config.hidden_size=32 model.config.num_hidden_layers=2 model.config.num_attention_heads=4"
         " model.config.intermediate_size=64 dataset.max_seq_length=64 dataset.max_tokens_per_batch=256"
         " logger.frequency=1 checkpoint.save_every_n_steps=3 checkpoint.max_checkpoints=10"
         " scheduler.warmup_steps=2 num_train_steps=" + std::to_string(steps);
}

std::vector<int64_t> metric_steps(const std::string& path) {
  std::vector<int64_t> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line).at("step").get<int64_t>());
  return out;
}

}  // namespace

TEST(E2eHardening, BadConfigJsonNamesFileAndKey) {
  const std::string in = src("data/proteins_val.fasta"), out = fresh_dir("cfg") + "/e.safetensors";
  struct Case {
    const char* key;
    json value;
  };
  const std::vector<Case> cases = {{"max_position_embeddings", INT64_MIN},
                                   {"max_position_embeddings", 0},
                                   {"max_position_embeddings", int64_t(1) << 50},
                                   {"hidden_size", -320},
                                   {"num_hidden_layers", 1e30},
                                   {"token_dropout", "yes"},
                                   {"layer_norm_eps", -1e-5},
                                   {"model_type", 3}};
  for (const Case& c : cases) {
    const std::string m = model_with("esm2_tiny", c.key, c.value);
    expect_clean_error(run("embed --model " + m + " --input " + in + " --output " + out), {"config.json", c.key},
                       std::string(c.key) + "=" + c.value.dump());
  }
  const std::string m = model_with("llama_tiny", "rope_parameters", json::array({1}));
  expect_clean_error(run("eval --model " + m + " --input " + src("data/dna_val.fasta")),
                     {"config.json", "rope_parameters"}, "rope_parameters=[1]");
  EXPECT_FALSE(fs::exists(out));
}

TEST(E2eHardening, Latin1FastaHeaderIsReplacedAndSaidOnce) {
  const std::string d = fresh_dir("latin1");
  write_file_atomic(d + "/in.fasta", ">caf\xE9 one\nMKTAYIAKQR\n>na\xEFve\nMKVLAAG\n>plain\nMSTNPK\n");
  RunResult r = run("embed --model " + src("tests/fixtures/esm2_tiny") + " --input " + d + "/in.fasta --output " + d +
                    "/e.safetensors");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("UTF-8"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("UTF-8"), r.output.rfind("UTF-8")) << "said more than once:\n" << r.output;
  const SafetensorsFile f = read_safetensors(d + "/e.safetensors");
  const json names = json::parse(f.metadata.at("names"));
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[0], "caf\xEF\xBF\xBD");
  EXPECT_EQ(names[2], "plain");

  // eval's JSON output too.
  write_file_atomic(d + "/dna.fasta", ">s\xE9q\nACGTACGTACGTAAAC\n");
  RunResult v = run("eval --model " + src("tests/fixtures/llama_tiny") + " --input " + d + "/dna.fasta");
  ASSERT_EQ(v.code, 0) << v.output;
  EXPECT_NE(v.output.find("s\xEF\xBF\xBDq"), std::string::npos) << v.output;
}

TEST(E2eHardening, SillyFlagValuesAreRejected) {
  // Values out of a flag's range: usage errors (exit 2), naming the flag.
  const std::string d = fresh_dir("flags");
  const std::string embed = "embed --model " + src("tests/fixtures/esm2_tiny") + " --input " +
                            src("data/proteins_val.fasta") + " --output " + d + "/e.safetensors ";
  for (const char* v : {"0", "-1", "1", "2", "-9223372036854775808", "99999999999"})
    expect_clean_error(run(embed + "--max-seq-length " + v), {"--max-seq-length"}, v, 2);
  expect_clean_error(run(embed + "--max-tokens 0"), {"--max-tokens"}, "--max-tokens 0", 2);
  EXPECT_FALSE(fs::exists(d + "/e.safetensors"));
  RunResult ok = run(embed + "--max-seq-length 3");
  ASSERT_EQ(ok.code, 0) << ok.output;
  const SafetensorsFile f = read_safetensors(d + "/e.safetensors");
  const Tensor& e = f.get("embeddings");
  double sum = 0;
  for (int64_t i = 0; i < e.numel(); ++i) sum += std::abs(e.f32()[i]);
  EXPECT_GT(sum, 0) << "embeddings must not be all zero";

  const std::string gen = "generate --model " + src("tests/fixtures/llama_tiny") + " --prompt ACGT ";
  expect_clean_error(run(gen + "--temperature nan"), {"--temperature"}, "nan", 2);
  expect_clean_error(run(gen + "--max-new-tokens 99999999999"), {"--max-new-tokens"}, "huge", 2);
  expect_clean_error(run("eval --model " + src("tests/fixtures/llama_tiny") + " --input " + src("data/dna_val.fasta") +
                         " --stride -5"),
                     {"--stride"}, "stride", 2);
}

TEST(E2eHardening, SigtermCheckpointsAndResumeKeepsMetricsOnce) {
  const std::string out = fresh_dir("sigterm");
  const std::string bin = BIOFM_BINARY;
  // Start a long run, wait until it has logged a step, send SIGTERM once.
  RunResult r = sh("(" + bin + " " + tiny_train_args(out, 100000) + " checkpoint.save_every_n_steps=0 & pid=$!; " +
                   "for i in $(seq 600); do [ -s " + out + "/metrics.jsonl ] && break; sleep 0.1; done; " +
                   "kill -TERM $pid; wait $pid; echo \"exit=$?\")");
  EXPECT_NE(r.output.find("exit=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped by signal"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/final_model")) << "an interrupted run exported a final model";
  std::vector<std::string> steps;
  for (auto& e : fs::directory_iterator(out + "/checkpoints")) steps.push_back(e.path().filename().string());
  ASSERT_EQ(steps.size(), 1u) << r.output;
  const int64_t saved = std::stoll(steps[0].substr(5));
  ASSERT_EQ(metric_steps(out + "/metrics.jsonl").back(), saved);

  // A stale temporary directory from a killed save, and metrics logged past the checkpoint
  // (as when a run dies between saves), the last line cut short by the kill: all are cleaned on
  // resume. `biofm report` skips the cut line too, and says so.
  fs::create_directories(out + "/checkpoints/.tmp_step_99.2147483646");
  {
    std::ofstream m(out + "/metrics.jsonl", std::ios::app);
    m << json{{"step", saved + 1}, {"loss", 1.0}}.dump() << "\n" << json{{"step", saved + 2}, {"loss", 1.0}}.dump() << "\n"
      << "{\"step\": " << saved + 3 << ", \"lo";
  }
  const std::string text = read_file(out + "/metrics.jsonl");
  const std::string cut_line = std::to_string(std::count(text.begin(), text.end(), '\n') + 1);
  RunResult rep = run("report " + out + " --output " + out + "/report.html");
  ASSERT_EQ(rep.code, 0) << rep.output;
  EXPECT_NE(rep.output.find("metrics.jsonl:" + cut_line + ": skipped the last line, cut short"), std::string::npos)
      << rep.output;
  EXPECT_TRUE(fs::exists(out + "/report.html"));
  const int target = 3 * (int(saved) / 3 + 2);  // a multiple of save_every_n_steps past `saved`
  RunResult res = run(tiny_train_args(out, target));
  ASSERT_EQ(res.code, 0) << res.output;
  EXPECT_NE(res.output.find("resumed from"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("dropped 2 record(s) after step " + std::to_string(saved) + " and a last line cut short by a kill"),
            std::string::npos) << res.output;
  EXPECT_NE(res.output.find("removed an incomplete checkpoint"), std::string::npos) << res.output;
  EXPECT_FALSE(fs::exists(out + "/checkpoints/.tmp_step_99.2147483646"));
  const std::vector<int64_t> logged = metric_steps(out + "/metrics.jsonl");
  std::set<int64_t> unique(logged.begin(), logged.end());
  EXPECT_EQ(unique.size(), logged.size()) << "a step was logged twice";
  EXPECT_EQ(logged.back(), target);

  // Re-running the finished run says there is nothing to do (and no "loss 0.0000 -> 0.0000").
  RunResult again = run(tiny_train_args(out, target));
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to train"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("0.0000 -> 0.0000"), std::string::npos) << again.output;

  // num_train_steps below the newest checkpoint is an error, not the later model returned.
  expect_clean_error(run(tiny_train_args(out, 1)), {"num_train_steps"}, "below checkpoint");
}

// The last step is saved even when num_train_steps is not a multiple of save_every_n_steps, so
// the same command started again finds the run finished (it trained the whole run anew and
// rewrote metrics.jsonl); save_every_n_steps=0 saves none.
TEST(E2eHardening, TheLastStepIsCheckpointedSoAFinishedRunIsNotTrainedAgain) {
  const std::string out = fresh_dir("last_step");
  RunResult r = run(tiny_train_args(out, 5));  // (save_every_n_steps=3)
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out + "/checkpoints/step_3")) << r.output;
  EXPECT_TRUE(fs::exists(out + "/checkpoints/step_5")) << r.output;
  const std::string metrics = read_file(out + "/metrics.jsonl");
  RunResult again = run(tiny_train_args(out, 5));
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to train"), std::string::npos) << again.output;
  EXPECT_EQ(read_file(out + "/metrics.jsonl"), metrics);
  const std::string none = fresh_dir("last_step_none");
  ASSERT_EQ(run(tiny_train_args(none, 5) + " checkpoint.save_every_n_steps=0").code, 0);
  EXPECT_FALSE(fs::exists(none + "/checkpoints/step_5"));
}

TEST(E2eHardening, AllCheckpointsCorruptIsSaid) {
  const std::string out = fresh_dir("allcorrupt");
  ASSERT_EQ(run(tiny_train_args(out, 3)).code, 0);
  write_file_atomic(out + "/checkpoints/step_3/manifest.json", R"({"format": "biofm-checkpoint-v1"})");
  RunResult r = run(tiny_train_args(out, 3));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("starting from step 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step_3"), std::string::npos) << r.output;
  EXPECT_EQ(metric_steps(out + "/metrics.jsonl").size(), 3u);
}

TEST(E2eHardening, ARepeatedSignalIsOneStopAndLeavesOnlyCompleteCheckpoints) {
  // The same signal twice within moments (a process group's Ctrl-C and `biofm launch` passing it
  // on) is one stop: the step finishes, a checkpoint is written, exit 0. (A signal 2 s or more
  // after the first exits at once: 128 + its number.)
  const std::string out = fresh_dir("sigtwice");
  const std::string bin = BIOFM_BINARY;
  RunResult r = sh("(" + bin + " " + tiny_train_args(out, 100000) + " checkpoint.save_every_n_steps=1 & pid=$!; " +
                   "for i in $(seq 600); do [ -s " + out + "/metrics.jsonl ] && break; sleep 0.1; done; " +
                   "kill -TERM $pid; sleep 0.01; kill -TERM $pid; wait $pid; echo \"exit=$?\")");
  EXPECT_NE(r.output.find("exit=0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped by signal"), std::string::npos) << r.output;
  int complete = 0;
  for (auto& e : fs::directory_iterator(out + "/checkpoints")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0) continue;
    EXPECT_TRUE(fs::exists(e.path() / "manifest.json")) << name;
    ++complete;
  }
  EXPECT_GE(complete, 1) << r.output;
  // The next run starts cleanly from the newest complete checkpoint.
  RunResult next = run(tiny_train_args(out, 20));
  ASSERT_EQ(next.code, 0) << next.output;
  for (auto& e : fs::directory_iterator(out + "/checkpoints"))
    EXPECT_NE(e.path().filename().string().rfind(".tmp_step_", 0), 0u) << e.path();
}

TEST(E2eHardening, TrainRejectsSequencesLongerThanThePositions) {
  // A YAML edit like max_seq_length 256 -> 2560000 used to run (growing batches) until killed.
  const std::string out = fresh_dir("longseq");
  expect_clean_error(run(tiny_train_args(out, 2) + " dataset.max_seq_length=2560000 dataset.max_tokens_per_batch=2560000"),
                     {"dataset.max_seq_length", "max_position_embeddings"}, "max_seq_length 2560000");
  EXPECT_FALSE(fs::exists(out + "/metrics.jsonl"));
}

TEST(E2eHardening, FullDiskDuringASaveIsAClearErrorAndKeepsThePreviousCheckpoint) {
  // A full disk, simulated with a file-size limit (RLIMIT_FSIZE via `ulimit -f`, SIGXFSZ
  // ignored so that write() fails with EFBIG as it would with ENOSPC): the model file of a
  // checkpoint (~100 KB) cannot be written, the small files (metrics, config) can.
  const std::string out = fresh_dir("fulldisk");
  ASSERT_EQ(run(tiny_train_args(out, 3)).code, 0);
  RunResult r = sh("bash -c \"trap '' XFSZ; ulimit -f 32; exec " + std::string(BIOFM_BINARY) + " " +
                   tiny_train_args(out, 6) + "\"");
  expect_clean_error(r, {"saving the checkpoint of step 6", "File too large"}, "file-size limit");
  for (auto& e : fs::directory_iterator(out + "/checkpoints"))
    EXPECT_EQ(e.path().filename().string(), "step_3") << "left behind: " << e.path();
  // The previous checkpoint is intact: the next run (with room) resumes from it.
  RunResult next = run(tiny_train_args(out, 6));
  ASSERT_EQ(next.code, 0) << next.output;
  EXPECT_NE(next.output.find("resumed from " + out + "/checkpoints/step_3 "), std::string::npos) << next.output;
}

TEST(E2eHardening, DivergenceNamesTheStepAndTheFirstNonFiniteTensor) {
  // A learning rate of 1e30 blows the weights up after the first update; the loss of the
  // next step is non-finite, and so is every one after (the updates are skipped).
  const std::string out = fresh_dir("diverge");
  RunResult r = run(tiny_train_args(out, 30) + " optimizer.lr=1e30 scheduler.warmup_steps=0 checkpoint.save_every_n_steps=1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("training diverged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("warning: step 2: non-finite"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the first parameter (in model order) with"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" esm."), std::string::npos) << "no parameter named:\n" << r.output;
  // The checkpoint it points at exists, and is the state before the divergence: none is saved
  // while the loss is non-finite (it would be where a resume starts).
  const size_t at = r.output.find("The last checkpoint is ");
  ASSERT_NE(at, std::string::npos) << r.output;
  std::string dir = r.output.substr(at + 23);
  dir = dir.substr(0, dir.find_first_of("\n "));
  EXPECT_TRUE(fs::exists(dir + "/manifest.json")) << dir;
  EXPECT_EQ(fs::path(dir).filename(), "step_1") << r.output;
  EXPECT_NE(r.output.find("warning: step 2: no checkpoint saved: the loss or gradients are non-finite"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step_2"));
}

// A run that diverges in its last steps (fewer than the 10 non-finite checks that stop it
// midway) ends diverged too: exit 1, said, and no final model exported.
TEST(E2eHardening, DivergenceAtTheEndIsAFailureWithoutAFinalModel) {
  const std::string out = fresh_dir("diverge_end");
  RunResult r = run(tiny_train_args(out, 4) +
                    " optimizer.lr=1e30 scheduler.warmup_steps=0 clip_grad_norm=0 checkpoint.save_every_n_steps=2");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("training diverged: non-finite loss or gradients at each of the last 3 step(s) (steps 2-4"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no final model was exported"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No checkpoint was saved."), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("done:"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/final_model")) << r.output;
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step_2")) << r.output;
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step_4")) << r.output;
}

// A last step that alone went non-finite: its update was skipped, so the model is the step
// before's. If that model gives a non-finite loss on the next batch too (lr 1e30: its weights
// blew up at step 1), the run ended diverged; if it gives a finite one (a bad batch, simulated by
// BIOFM_TEST_NONFINITE_STEP), the model is exported with a warning. Either way no checkpoint is
// saved at that step.
TEST(E2eHardening, ALastNonFiniteStepAloneIsTestedOnTheNextBatch) {
  const std::string out = fresh_dir("diverge_last");
  RunResult r = run(tiny_train_args(out, 2) +
                    " optimizer.lr=1e30 scheduler.warmup_steps=0 clip_grad_norm=0 checkpoint.save_every_n_steps=2");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("each of the last 1 step(s) (steps 2-2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the final weights give a non-finite loss on the next batch too"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out + "/final_model")) << r.output;
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step_2")) << r.output;

  const std::string ok = fresh_dir("bad_last_batch");
  RunResult b = sh("BIOFM_TEST_NONFINITE_STEP=4 " + std::string(BIOFM_BINARY) + " " + tiny_train_args(ok, 4) +
                   " checkpoint.save_every_n_steps=2");
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("warning: step 4: non-finite loss"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("one bad batch, so the model is exported"), std::string::npos) << b.output;
  EXPECT_TRUE(fs::exists(ok + "/final_model/model.safetensors")) << b.output;
  EXPECT_TRUE(fs::exists(ok + "/checkpoints/step_2")) << b.output;
  EXPECT_FALSE(fs::exists(ok + "/checkpoints/step_4")) << b.output;
}

// A metrics.jsonl whose last complete record lacks its newline (a kill between the record and
// its newline) gets one on resume: the next record starts a line of its own.
TEST(E2eHardening, ResumeEndsAnUnterminatedLastRecord) {
  const std::string out = fresh_dir("unterminated");
  ASSERT_EQ(run(tiny_train_args(out, 3)).code, 0);
  std::string text = read_file(out + "/metrics.jsonl");
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(text.back(), '\n');
  text.pop_back();
  write_file_atomic(out + "/metrics.jsonl", text);
  RunResult r = run(tiny_train_args(out, 5));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<int64_t> logged = metric_steps(out + "/metrics.jsonl");  // (throws on a joined line)
  ASSERT_FALSE(logged.empty());
  EXPECT_EQ(logged.back(), 5);
  EXPECT_EQ(std::count(logged.begin(), logged.end(), 3), 1);
}

// Resuming with another model's settings fails and leaves that run's checkpoints as they are
// (it used to skip every checkpoint as unloadable, start over and overwrite them), as does
// starting over among them with resume off; a changed seed or dataset resumes with a note.
TEST(E2eHardening, ResumeWithAnotherModelFailsAndKeepsTheRun) {
  const std::string out = fresh_dir("other_model");
  ASSERT_EQ(run(tiny_train_args(out, 3)).code, 0);
  const std::string saved = read_file(out + "/checkpoints/step_3/model.safetensors");
  RunResult wider = run(tiny_train_args(out, 6) + " model.config.hidden_size=64");
  EXPECT_EQ(wider.code, 1) << wider.output;
  EXPECT_NE(wider.output.find("was written for another model (model.config.hidden_size: 32 in the checkpoint, 64 now)"),
            std::string::npos) << wider.output;
  RunResult heads = run(tiny_train_args(out, 6) + " model.config.num_attention_heads=2");
  EXPECT_EQ(heads.code, 1) << heads.output;
  EXPECT_NE(heads.output.find("model.config.num_attention_heads: 4 in the checkpoint, 2 now"), std::string::npos)
      << heads.output;
  EXPECT_EQ(read_file(out + "/checkpoints/step_3/model.safetensors"), saved);
  EXPECT_FALSE(fs::exists(out + "/checkpoints/step_6"));

  // Starting over (resume off) among that run's checkpoints would mix the two runs: refused.
  RunResult fresh = run(tiny_train_args(out, 6) + " checkpoint.resume_from_checkpoint=false");
  EXPECT_EQ(fresh.code, 1) << fresh.output;
  EXPECT_NE(fresh.output.find("holds 1 checkpoint(s) of an earlier run"), std::string::npos) << fresh.output;
  EXPECT_EQ(read_file(out + "/checkpoints/step_3/model.safetensors"), saved);

  RunResult seed = run(tiny_train_args(out, 6) + " seed=7");
  ASSERT_EQ(seed.code, 0) << seed.output;
  EXPECT_NE(seed.output.find("resumed from"), std::string::npos) << seed.output;
  EXPECT_NE(seed.output.find("note: seed=7 here, 42 in the checkpoint's run"), std::string::npos) << seed.output;
}

TEST(E2eHardening, JsonlNumberOutOfRangeIsAnInvalidLineNotAnInternalError) {
  // Found by fuzz_reader (fuzz/regression/fuzz_reader/jsonl_number_overflow): a number that
  // overflows a double made the JSON parser throw out_of_range, which the reader let through.
  const std::string dir = fresh_dir("jsonl_overflow");
  write_file_atomic(dir + "/in.jsonl", "{\"sequence\": \"MKTAYIAK\"}\n{\"sequence\": \"MKV\", \"x\": 1e400}\n");
  expect_clean_error(run("embed --model " + src("tests/fixtures/esm2_tiny") + " --input " + dir + "/in.jsonl --output " +
                         dir + "/out.safetensors"),
                     {"in.jsonl", "2", "invalid JSON"}, "1e400");
}

// A checkpoint past num_train_steps fails before anything says it was resumed, and the advice is
// one the next run takes (checkpoint.resume_from_checkpoint=false is refused among checkpoints).
TEST(E2eHardening, ACheckpointPastNumTrainStepsGivesAdviceThatWorks) {
  const std::string out = fresh_dir("past_end");
  ASSERT_EQ(run(tiny_train_args(out, 6)).code, 0);
  RunResult r = run(tiny_train_args(out, 4));
  expect_clean_error(r, {"is at step 6, past num_train_steps=4; raise num_train_steps, or use another output_dir (or "
                         "checkpoint.ckpt_dir) to start over"}, "past the end");
  EXPECT_EQ(r.output.find("resume_from_checkpoint"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("resumed from"), std::string::npos) << r.output;
}

// A resume with changed training settings says so, one note per key (only seed and dataset.path
// had notes; the learning rate jumped silently).
TEST(E2eHardening, ResumeWithChangedHyperParametersIsNoted) {
  const std::string out = fresh_dir("changed_hparams");
  ASSERT_EQ(run(tiny_train_args(out, 3)).code, 0);
  RunResult same = run(tiny_train_args(out, 3));
  ASSERT_EQ(same.code, 0) << same.output;
  EXPECT_EQ(same.output.find("in the checkpoint's run"), std::string::npos) << same.output;
  RunResult r = run(tiny_train_args(out, 5) + " optimizer.lr=0.01 dataset.max_tokens_per_batch=512 scheduler.warmup_steps=4");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const std::string note :
       {"note: optimizer.lr=0.01 here, 0.002 in the checkpoint's run: the updates from here on use it\n",
        "note: num_train_steps=5 here, 3 in the checkpoint's run: the learning-rate schedule is recomputed",
        "note: scheduler.warmup_steps=4 here, 2 in the checkpoint's run: the learning-rate schedule is recomputed",
        "note: dataset.max_tokens_per_batch=512 here, 256 in the checkpoint's run: the batches from here on differ"})
    EXPECT_NE(r.output.find(note), std::string::npos) << note << "\n" << r.output;
}

// A step directory without its manifest is warned about like any unusable checkpoint, and
// rotation neither counts nor deletes a checkpoint found unusable: it used to delete the valid
// step_6 and keep the broken step_7.
TEST(E2eHardening, UnusableCheckpointsAreSaidAndRotationKeepsTheUsableOnes) {
  const std::string out = fresh_dir("unusable_rotation");
  const std::string every2 = " checkpoint.save_every_n_steps=2 checkpoint.max_checkpoints=";
  ASSERT_EQ(run(tiny_train_args(out, 6) + every2 + "0").code, 0);
  const std::string ckpt = out + "/checkpoints";
  fs::remove(ckpt + "/step_6/manifest.json");
  RunResult r = run(tiny_train_args(out, 6) + every2 + "0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: skipping checkpoint " + ckpt + "/step_6: " + ckpt + "/step_6/manifest.json is missing"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from " + ckpt + "/step_4 (step 4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("newer checkpoints failed to load"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(ckpt + "/step_6/manifest.json")) << "saved again";

  fs::rename(ckpt + "/step_6", ckpt + "/step_7");
  RunResult rot = run(tiny_train_args(out, 8) + every2 + "2");
  ASSERT_EQ(rot.code, 0) << rot.output;
  EXPECT_NE(rot.output.find("step_7: "), std::string::npos) << rot.output;
  EXPECT_NE(rot.output.find("checkpoint rotation does not count it"), std::string::npos) << rot.output;
  for (const char* kept : {"step_6", "step_7", "step_8"}) EXPECT_TRUE(fs::exists(ckpt + "/" + kept)) << kept;
  for (const char* gone : {"step_2", "step_4"}) EXPECT_FALSE(fs::exists(ckpt + "/" + gone)) << gone;
}

// A checkpoint directory no checkpoint can be written into fails before step 1 (it used to fail
// at the first save; as root, only creating something there tells).
TEST(E2eHardening, AnUnwritableCheckpointDirectoryFailsAtStart) {
  const std::string out = fresh_dir("unwritable_ckpt");
  RunResult r = run(tiny_train_args(out, 4) + " checkpoint.ckpt_dir=/proc");
  expect_clean_error(r, {"biofm train: error: ", "/proc", "not writable"}, "ckpt_dir /proc");
  EXPECT_FALSE(fs::exists(out + "/metrics.jsonl")) << r.output;
  EXPECT_EQ(r.output.find("step 1"), std::string::npos) << r.output;
}

// A facebook/esm2 directory's contact head, which biofm keeps only to write into exports, was
// noted at every load (embed, score, eval: noise, and a BiofmWarning per Python call); now the
// fine-tune that writes an export says it, naming the export.
TEST(E2eHardening, FineTuningNotesTheContactHeadAtTheExportOnly) {
  const std::string d = fresh_dir("init_from_export"), esm = src("tests/fixtures/esm2_tiny");
  write_file_atomic(d + "/in.fasta", ">a\nMKTAYIAKQR\n");
  RunResult e = run("embed --model " + esm + " --input " + d + "/in.fasta --output " + d + "/e.safetensors");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_EQ(e.output.find("contact"), std::string::npos) << e.output;
  RunResult t = run("train --config-dir " + src("configs") + " --config-name esm2_sanity output_dir=" + d +
                    "/run model.init_from=" + esm + " dataset.path=" + src("data/proteins_sample.fasta") +
                    " dataset.val_path=null dataset.val_every_n_steps=0 dataset.max_seq_length=64"
                    " dataset.max_tokens_per_batch=256 checkpoint.save_every_n_steps=0 num_train_steps=1");
  ASSERT_EQ(t.code, 0) << t.output;
  const std::string said = "note: " + d + "/run/final_model: 2 tensors of model.init_from that biofm does not train (" +
                           "esm.contact_head.regression.";
  EXPECT_NE(t.output.find(said), std::string::npos) << t.output;
  EXPECT_EQ(t.output.find("contact"), t.output.rfind("contact")) << "said once, at the export:\n" << t.output;
}
