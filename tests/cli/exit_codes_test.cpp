// The front door's contract (README.md, "Exit codes"; cli/flags.h): the biofm binary run as a
// subprocess exits 2 with "biofm COMMAND: ..." for whatever is wrong with the command line
// (flags, flag values, config overrides), 1 with "biofm COMMAND: error: ..." for what goes wrong
// while doing the work; `biofm --help` lists each command's own summary, and `train --help` /
// `bench --help` every config key of the schema that parses the overrides.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "biofm/cli/commands.h"
#include "biofm/train/config.h"
#include "biofm/io/config.h"
#include "e2e/cli_run.h"

namespace {

using biofm::testkit::RunResult;
using biofm::testkit::run_biofm;
using biofm::testkit::src;

// Some line of `output` starts with `start`.
bool has_line(const std::string& output, const std::string& start) {
  for (size_t at = 0; at < output.size();) {
    if (output.compare(at, start.size(), start) == 0) return true;
    const size_t nl = output.find('\n', at);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return false;
}

void expect_usage(const std::string& cmd, const std::string& args, const std::string& message) {
  const RunResult r = run_biofm(cmd + " " + args);
  EXPECT_EQ(r.code, 2) << cmd << " " << args << "\n" << r.output;
  EXPECT_TRUE(has_line(r.output, "biofm " + cmd + ": " + message)) << cmd << " " << args << "\n" << r.output;
  EXPECT_NE(r.output.find("Run 'biofm " + cmd + " --help' for usage."), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(": error:"), std::string::npos) << "a usage error reported as a runtime error:\n" << r.output;
}

void expect_runtime(const std::string& cmd, const std::string& args, const std::string& message) {
  const RunResult r = run_biofm(cmd + " " + args);
  EXPECT_EQ(r.code, 1) << cmd << " " << args << "\n" << r.output;
  EXPECT_TRUE(has_line(r.output, "biofm " + cmd + ": error: ")) << cmd << " " << args << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << cmd << " " << args << "\n" << r.output;
}

const std::string kEsm = src("tests/fixtures/esm2_tiny");

}  // namespace

TEST(ExitCodes, BadFlagValuesAreUsageErrors) {
  const std::string embed = "--model " + kEsm + " --input /nonexistent/x.fasta --output y.safetensors --device cpu ";
  expect_usage("embed", embed + "--pooling foo", "--pooling must be mean, cls, last or none, got 'foo'");
  expect_usage("embed", "--model " + kEsm + " --input x --output y --device gpu",
               "--device must be auto, cpu, cuda or cuda:N, got 'gpu'");
  expect_usage("embed", embed + "--device cuda:x", "--device 'cuda:x': expected cuda:N");
  expect_usage("embed", embed + "--max-tokens -5", "--max-tokens must lie in [1, 67108864], got -5");
  expect_usage("embed", embed + "--max-tokens 1e9x", "--max-tokens expects an integer, got '1e9x'");
  expect_usage("embed", embed + "--precision fp16", "--precision must be bf16, fp8 or fp32, got 'fp16'");
  expect_usage("embed", embed + "--output-format csv", "--output-format must be safetensors or npy, got 'csv'");
  expect_usage("embed", embed + "--layers 1,x", "--layers: 'x' is not an integer");
  expect_usage("embed", embed + "--logits", "--logits needs --per-token");
  expect_usage("eval", "--model " + kEsm + " --input /nonexistent/x.fasta --device cpu --format xml",
               "--format: unknown sequence format 'xml'");
  expect_usage("eval", "--model " + kEsm + " --input x --split dev", "--split must be train, val or test, got 'dev'");
  expect_usage("generate", "--model m --prompt ACGT --temperature -1", "--temperature must be a finite number");
  expect_usage("prepare", "--input x --output y --family protbert", "--family: unknown model family 'protbert'");
  expect_usage("prepare", "--input x --output y --family esm2 --on-error maybe",
               "--on-error must be fail or skip, got 'maybe'");
  expect_usage("bench-data", "--data x --seconds 1e9", "--seconds must be a finite number in [0, 3600]");
  expect_usage("bench", "--shape 8M --steps 0", "--steps must lie in [1, 1073741824], got 0");
  expect_usage("bench", "--shape 8M --device gpu", "--device must be cpu or cuda, got 'gpu'");
  expect_usage("bench", "--shape 8M --tokens-per-batch many", "config key 'dataset.max_tokens_per_batch'");
  expect_usage("bench", "--model esm2 --shape 9M", "unknown shape 'esm2:9M'");
  expect_usage("launch", "--nproc-per-node 0 info", "--nproc-per-node must lie in [1, 4096], got 0");
  expect_usage("info", "extra", "unexpected argument 'extra'");
  // An empty value (an unset shell variable) is a missing value.
  expect_usage("embed", "--model '' --input x --output y", "--model needs a value (DIR), got an empty one");
  expect_usage("generate", "--model m --prompt=", "--prompt needs a value");
  expect_usage("train", "--config-name esm2_sanity --cp_size=2",
               "unknown option '--cp_size'; config keys are written without dashes: cp_size=2");
  expect_usage("train", "--config-name esm2_sanity dataset.path=", "the override 'dataset.path=' leaves dataset.path empty: give it a value");
  // Flags themselves, as before.
  expect_usage("train", "--config-nmae esm2_sanity", "unknown option '--config-nmae'; did you mean '--config-name'?");
  // Hydra's spelling of --config-dir
  expect_usage("train", "--config-path /x --config-name esm2_sanity",
               "unknown option '--config-path'; did you mean '--config-dir' (Hydra's --config-path)?");
  expect_usage("train", "seed=1", "missing required option --config-name");
}

TEST(ExitCodes, CommandLineConfigOverridesAreUsageErrors) {
  const std::string train = "--config-name esm2_sanity ";
  expect_usage("train", train + "foo.bar=1", "unknown config key 'foo.bar' (");  // near no key: no suggestion
  expect_usage("train", train + "num_train_steps=abc", "config key 'num_train_steps' expects an int");
  expect_usage("train", train + "num_train_steps=-3", "config key 'num_train_steps'");
  expect_usage("train", train + "device=gpu", "config key 'device' must be one of");
  expect_usage("train", train + "optimizer.lr", "malformed override 'optimizer.lr'");
  // Layer lists: 1-indexed, each layer once (a duplicate exited 1 from the model setup; [0] was
  // "element 0 is 0.0").
  expect_usage("train", train + "fp8_config.enabled=true 'fp8_layers=[1,1]'",
               "config key 'fp8_layers' lists layer 1 twice (in [1, 1]); give each layer once");
  expect_usage("train", train + "'fp8_layers=[0]'",
               "config key 'fp8_layers' lists layers 1-indexed (1..num_layers); 0 is not a layer number (in [0])");
  expect_usage("train", train + "fp4_config.enabled=true 'fp4_layers=[2,3,2]'",
               "config key 'fp4_layers' lists layer 2 twice (in [2, 3, 2])");
  // Every problem at once, named as the overrides'.
  const RunResult two = run_biofm("train " + train + "optimizer.lrr=1 seed=x");
  EXPECT_EQ(two.code, 2) << two.output;
  EXPECT_TRUE(has_line(two.output, "biofm train: the config overrides: 2 problems:")) << two.output;
  EXPECT_NE(two.output.find("did you mean 'optimizer.lr'"), std::string::npos) << two.output;
  // --ops of the inference commands is the same kind of override.
  expect_usage("embed", "--model " + kEsm + " --input x --output y --device cpu --ops sdpa_dense=maybe", "--ops: ");
  // Valid overrides pass the check (and --print-config shows them).
  const RunResult ok = run_biofm("train " + train + "num_train_steps=7 optimizer.lr=1e-3 --print-config");
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("num_train_steps: 7"), std::string::npos) << ok.output;
}

TEST(ExitCodes, FailuresWhileRunningAreRuntimeErrors) {
  expect_runtime("train", "--config-name no_such_config", "no_such_config");
  expect_runtime("embed", "--model /nonexistent/model --input x --output y --device cpu", "/nonexistent/model");
  // A layer the model does not have: the flag is well formed, the model decides.
  expect_runtime("embed", "--model " + kEsm + " --input x --output y --device cpu --layers 7",
                 "the model has layers 0 (embeddings) to 2");
  expect_runtime("report", "/nonexistent/run", "/nonexistent/run");
  // A mistake inside a config file the user wrote is an input error, not a usage error.
  const std::string dir = biofm::testkit::fresh_dir("exit_codes_config");
  std::ofstream(dir + "/mine.yaml") << "defaults: [esm2_sanity]\nnum_train_steps: 3\nfoo: 1\n";
  expect_runtime("train", "--config-dir " + dir + " --config-name mine", "unknown config key 'foo'");
  // ... and so is a cross-key rule of the composed config.
  expect_runtime("train", "--config-name esm2_sanity 'dataset.weights=[1,2]'", "dataset.weights");
}

TEST(ExitCodes, TopLevelHelpListsEachCommandsOwnSummary) {
  const RunResult top = run_biofm("--help");
  ASSERT_EQ(top.code, 0) << top.output;
  EXPECT_NE(top.output.find("Exit codes: 0 success, 1 runtime error, 2 usage error"), std::string::npos) << top.output;
  for (const biofm::Command& c : biofm::kCommands) {
    const std::string& name = c.spec->name;
    const std::string& summary = c.spec->summary;
    ASSERT_FALSE(summary.empty()) << name;
    EXPECT_EQ(summary.find('\n'), std::string::npos) << name << ": the summary is one line";
    // "  NAME   SUMMARY" in `biofm --help` ...
    const size_t at = top.output.find("\n  " + name + " ");
    ASSERT_NE(at, std::string::npos) << name << " is not listed:\n" << top.output;
    const std::string line = top.output.substr(at + 1, top.output.find('\n', at + 1) - at - 1);
    EXPECT_EQ(line.substr(line.size() - summary.size()), summary) << line;
    // ... and the line under the usage line of `biofm NAME --help`.
    const RunResult h = run_biofm(name + " --help");
    ASSERT_EQ(h.code, 0) << name << "\n" << h.output;
    EXPECT_EQ(h.output.rfind("usage: biofm " + name, 0), 0u) << h.output;
    EXPECT_NE(h.output.find("\n" + summary + "\n"), std::string::npos) << name << "\n" << h.output;
  }
}

// `biofm help CMD` is `biofm CMD --help` (it used to print the global usage); an unknown CMD, or
// anything more after help or --version, is a usage error (--version used to ignore it).
TEST(ExitCodes, HelpCommandIsTheCommandsHelp) {
  for (const biofm::Command& c : biofm::kCommands) {
    const std::string& name = c.spec->name;
    const RunResult h = run_biofm("help " + name), own = run_biofm(name + " --help");
    EXPECT_EQ(h.code, 0) << name << "\n" << h.output;
    EXPECT_EQ(h.output, own.output) << name;
    EXPECT_EQ(h.output.rfind("usage: biofm " + name, 0), 0u) << h.output;
  }
  EXPECT_EQ(run_biofm("--help train").output, run_biofm("train --help").output);
  const RunResult top = run_biofm("help");
  EXPECT_EQ(top.code, 0);
  EXPECT_EQ(top.output, run_biofm("--help").output);
  EXPECT_NE(top.output.find("help <command>"), std::string::npos) << top.output;
  const RunResult unknown = run_biofm("help trian");
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  EXPECT_TRUE(has_line(unknown.output, "biofm: unknown command 'trian'")) << unknown.output;
  for (const std::string args : {"help train extra", "--version extra", "version x"}) {
    const RunResult r = run_biofm(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(has_line(r.output, "biofm: unexpected argument")) << args << "\n" << r.output;
  }
}

TEST(ExitCodes, TrainAndBenchHelpListEveryConfigKey) {
  const biofm::config::Schema& schema = biofm::train_config_schema();
  for (const std::string cmd : {"train", "bench"}) {
    const RunResult h = run_biofm(cmd + " --help");
    ASSERT_EQ(h.code, 0) << h.output;
    const size_t keys = h.output.find("config keys (key=value overrides");
    ASSERT_NE(keys, std::string::npos) << h.output;
    EXPECT_LT(h.output.find("--config-dir"), keys) << "the keys come after the flags";
    EXPECT_EQ(h.output.find("See README.md for the keys"), std::string::npos);
    for (const auto& k : schema.keys()) {
      EXPECT_NE(h.output.find("\n  " + k.key + "  ", keys), std::string::npos) << cmd << ": no key " << k.key;
      if (!k.help.empty())
        EXPECT_NE(h.output.find("\n      " + k.help + "\n", keys), std::string::npos) << cmd << ": no help of " << k.key;
    }
  }
  const RunResult h = run_biofm("train --help");
  EXPECT_NE(h.output.find("\n  num_train_steps  int > 0, default 1000\n"), std::string::npos) << h.output;
  EXPECT_NE(h.output.find("\n  device  cpu|cuda, default cpu\n"), std::string::npos) << h.output;
}
