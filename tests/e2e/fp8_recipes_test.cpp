// The precision recipes end to end on the CPU (emulated quantization, fp32 GEMMs): each trains
// a tiny Llama on the bundled DNA sample within the recipes' FP8-vs-bf16 tolerance (5% of the
// loss) of fp32 at every step; layer-wise precision; DelayedScaling's state resumes exactly;
// FP8 statistics reach metrics.jsonl; settings that cannot run fail naming the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "e2e/cli_run.h"

namespace fs = std::filesystem;

namespace {

using biofm::testkit::read_metrics;
using biofm::testkit::RunResult;
using biofm::testkit::src;
RunResult run(const std::string& args) { return biofm::testkit::run_biofm(args); }

std::string fresh_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "/biofm_fp8r_" + name;
  fs::remove_all(d);
  return d;
}

std::string train_args(int layers, int steps) {
  return "train --config-dir " + src("configs") + " --config-name llama3_sanity dataset.path=" +
         src("data/dna_sample.fasta") +
         " model.config.hidden_size=32 model.config.num_hidden_layers=" + std::to_string(layers) +
         " model.config.num_attention_heads=2 model.config.num_key_value_heads=1"
         " model.config.intermediate_size=64 dataset.max_seq_length=256 dataset.stride=16"
         " dataset.max_tokens_per_batch=512 logger.frequency=1 checkpoint.save_final_model=false"
         " scheduler.warmup_steps=2 dataset.val_path= dataset.val_every_n_steps=0 optimizer.lr=1e-2"
         " num_train_steps=" + std::to_string(steps);
}

constexpr int kSteps = 8;

// Losses of a kSteps-step run with the given overrides (checkpoints off).
std::vector<double> losses(const std::string& name, const std::string& overrides, int layers,
                           std::string* output = nullptr, int steps = kSteps) {
  const std::string out = fresh_dir(name);
  RunResult r = run(train_args(layers, steps) + " checkpoint.save_every_n_steps=0 output_dir=" + out + " " + overrides);
  EXPECT_EQ(r.code, 0) << r.output;
  if (output) *output = r.output;
  std::vector<double> l;
  for (const auto& m : read_metrics(out + "/metrics.jsonl")) l.push_back(m["loss"].get<double>());
  return l;
}

// The fp32 reference of a model with `layers` layers (computed once per test binary run).
const std::vector<double>& reference(int layers) {
  static std::map<int, std::vector<double>> refs;
  auto it = refs.find(layers);
  // (a directory per test: ctest runs the tests of this file in parallel processes)
  const std::string name = "fp32_" + std::to_string(layers) + "_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  if (it == refs.end()) it = refs.emplace(layers, losses(name, "", layers)).first;
  return it->second;
}

void expect_tracks(const std::vector<double>& q, const std::vector<double>& ref, const std::string& what) {
  ASSERT_EQ(q.size(), size_t(kSteps)) << what;
  ASSERT_EQ(ref.size(), size_t(kSteps));
  EXPECT_LT(q.back(), q.front() - 0.2) << what << ": the loss did not fall";
  bool differs = false;
  for (size_t i = 0; i < q.size(); ++i) {
    EXPECT_NEAR(q[i], ref[i], 0.05 * ref[i]) << what << " step " << i + 1;  // the recipes' tolerance
    differs = differs || q[i] != ref[i];
  }
  EXPECT_TRUE(differs) << what << " had no effect";
}

// Six steps straight, and six with checkpoints every 3 steps resumed from step 3: the resumed
// steps' losses equal the straight run's. Returns the resumed run's directory.
std::string expect_resumes_exactly(const std::string& flags, const std::string& name) {
  const std::string straight = fresh_dir(name + "_straight"), resumed = fresh_dir(name + "_resumed");
  RunResult a = run(train_args(2, 6) + flags + " output_dir=" + straight);
  EXPECT_EQ(a.code, 0) << a.output;
  RunResult b = run(train_args(2, 6) + flags + " output_dir=" + resumed);
  EXPECT_EQ(b.code, 0) << b.output;
  EXPECT_TRUE(fs::exists(resumed + "/checkpoints/step_3/fp8_state.safetensors"));
  fs::remove_all(resumed + "/checkpoints/step_6");
  RunResult c = run(train_args(2, 6) + flags + " output_dir=" + resumed);
  EXPECT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  const auto ma = read_metrics(straight + "/metrics.jsonl"), mc = read_metrics(resumed + "/metrics.jsonl");
  EXPECT_EQ(ma.size(), 6u);
  EXPECT_EQ(mc.size(), 6u);
  for (size_t i = 3; i < 6 && i < ma.size() && i < mc.size(); ++i)
    EXPECT_EQ(mc[i]["loss"].get<double>(), ma[i]["loss"].get<double>()) << "step " << i + 1;
  return resumed;
}

}  // namespace

TEST(E2eFp8Recipes, DelayedScalingTracksFp32) {
  std::string out;
  const std::vector<double> delayed =
      losses("delayed", "fp8_config.enabled=true fp8_config.fp8_recipe=transformer_engine.common.recipe.DelayedScaling"
                        " fp8_config.fp8_recipe_kwargs.amax_history_len=16",
             2, &out);
  expect_tracks(delayed, reference(2), "DelayedScaling");
  EXPECT_NE(out.find("precision by layer: layers 1-2: fp8 DelayedScaling"), std::string::npos) << out;
  expect_tracks(losses("most_recent", "fp8_config.enabled=true fp8_config.fp8_recipe=DelayedScaling"
                                      " fp8_config.fp8_recipe_kwargs.amax_compute_algo=most_recent"
                                      " fp8_config.fp8_recipe_kwargs.margin=1", 2),
                reference(2), "DelayedScaling most_recent margin 1");
}

TEST(E2eFp8Recipes, Fp8AttentionTracksFp32) {
  std::string out;
  expect_tracks(losses("dpa_delayed", "fp8_config.enabled=true fp8_config.fp8_recipe=DelayedScaling"
                                      " fp8_config.fp8_recipe_kwargs.fp8_dpa=true", 2, &out),
                reference(2), "DelayedScaling + fp8_dpa");
  EXPECT_NE(out.find("precision by layer: layers 1-2: fp8 DelayedScaling + FP8 attention"), std::string::npos) << out;
  // Layer-wise: only layer 2's projections and attention in FP8.
  expect_tracks(losses("dpa_current", "fp8_config.enabled=true fp8_config.fp8_recipe_kwargs.fp8_dpa=true"
                                      " 'fp8_layers=[2]'", 2, &out),
                reference(2), "Float8CurrentScaling + fp8_dpa, layer 2");
  EXPECT_NE(out.find("layer 1: fp32, layer 2: fp8 Float8CurrentScaling + FP8 attention"), std::string::npos) << out;
}

TEST(E2eFp8Recipes, Float8BlockScalingTracksFp32) {
  expect_tracks(losses("block", "fp8_config.enabled=true fp8_config.fp8_recipe=Float8BlockScaling", 2), reference(2),
                "Float8BlockScaling");
}

TEST(E2eFp8Recipes, Mxfp8TracksFp32) {
  expect_tracks(losses("mxfp8", "fp8_config.enabled=true fp8_config.fp8_recipe=MXFP8BlockScaling", 2), reference(2),
                "MXFP8BlockScaling");
}

TEST(E2eFp8Recipes, Nvfp4TracksFp32) {
  std::string out;
  expect_tracks(losses("nvfp4", "fp4_config.enabled=true", 2, &out), reference(2), "NVFP4BlockScaling");
  EXPECT_NE(out.find("layers 1-2: fp4 NVFP4BlockScaling"), std::string::npos) << out;
}

TEST(E2eFp8Recipes, LayerWisePrecision) {
  std::string out;
  const std::vector<double> mixed =
      losses("mixed", "fp8_config.enabled=true fp4_config.enabled=true 'fp8_layers=[2]' 'fp4_layers=[3]'", 3, &out);
  expect_tracks(mixed, reference(3), "layer-wise");
  EXPECT_NE(out.find("precision by layer: layer 1: fp32, layer 2: fp8 Float8CurrentScaling, layer 3: fp4 "
                     "NVFP4BlockScaling"),
            std::string::npos)
      << out;
  // One list given, both enabled: the other format takes the rest.
  losses("rest", "fp8_config.enabled=true fp4_config.enabled=true 'fp8_layers=[1]'", 3, &out, 1);
  EXPECT_NE(out.find("layer 1: fp8 Float8CurrentScaling, layers 2-3: fp4 NVFP4BlockScaling"), std::string::npos)
      << out;
}

TEST(E2eFp8Recipes, DelayedScalingResumesExactly) {
  const std::string flags = " fp8_config.enabled=true fp8_config.fp8_recipe=DelayedScaling"
                            " fp8_config.fp8_recipe_kwargs.amax_history_len=4 checkpoint.save_every_n_steps=3";
  const std::string resumed = expect_resumes_exactly(flags, "d");
  // A changed history length cannot take the saved histories: they start fresh, saying why, and
  // the run resumes its weights and moments from the checkpoint (it restarted from step 0 and
  // rotated the checkpoint away).
  fs::remove_all(resumed + "/checkpoints/step_6");
  RunResult d = run(train_args(2, 6) + flags + " fp8_config.fp8_recipe_kwargs.amax_history_len=8 output_dir=" + resumed);
  ASSERT_EQ(d.code, 0) << d.output;
  EXPECT_NE(d.output.find("fp8_state.safetensors: 'fp8.delayed.amax_history' is"), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("it starts fresh; the weights and the optimizer state resume"), std::string::npos) << d.output;
  EXPECT_NE(d.output.find("resumed from"), std::string::npos) << d.output;
  EXPECT_EQ(d.output.find("starting from step 0"), std::string::npos) << d.output;
  EXPECT_TRUE(fs::exists(resumed + "/checkpoints/step_3")) << d.output;
  EXPECT_EQ(d.output.find("is not used"), std::string::npos) << d.output;
  // Resumed under another recipe (current scaling) or without FP8, the saved histories have no
  // place: one note on rank 0 says so (they were dropped silently); weights and moments resume.
  for (const std::string& other : {std::string(" fp8_config.enabled=true"), std::string()}) {
    fs::remove_all(resumed + "/checkpoints/step_6");
    RunResult e = run(train_args(2, 6) + other + " checkpoint.save_every_n_steps=3 output_dir=" + resumed);
    ASSERT_EQ(e.code, 0) << e.output;
    EXPECT_NE(e.output.find("resumed from"), std::string::npos) << e.output;
    EXPECT_NE(e.output.find("note: the checkpoint's DelayedScaling state (amax histories and scales, " + resumed +
                            "/checkpoints/step_3/fp8_state.safetensors) is not used: this run has no DelayedScaling "
                            "layers"),
              std::string::npos)
        << other << "\n" << e.output;
  }
}

// Without recompute each layer's forward runs once per step with FP8 attention too (the layer
// keeps the codes of q, k, v, not the tensors, and must not read that as "recompute me").
TEST(E2eFp8Recipes, Fp8AttentionRunsEachForwardOnce) {
  const std::string out = fresh_dir("dpa_once");
  RunResult r = run(train_args(2, 4) + " checkpoint.save_every_n_steps=0 output_dir=" + out +
                    " fp8_config.enabled=true fp8_config.fp8_recipe_kwargs.fp8_dpa=true profiler.range_times=true"
                    " profiler.start_step=2 profiler.end_step=3");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(out + "/range_times_rank0.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  std::map<std::string, int64_t> calls;
  for (const auto& range : j["ranges"]) calls[range["name"].get<std::string>()] = range["calls"].get<int64_t>();
  EXPECT_EQ(calls["sdpa forward fp8"], 4) << j.dump();  // 2 steps x 2 layers
  EXPECT_EQ(calls["sdpa backward fp8"], 4) << j.dump();
}

// FP8 attention's scales and amax histories travel in the checkpoint too: a resumed run goes on
// exactly as the straight one (no second calibration).
TEST(E2eFp8Recipes, Fp8AttentionResumesExactly) {
  const std::string flags = " fp8_config.enabled=true fp8_config.fp8_recipe_kwargs.fp8_dpa=true checkpoint.save_every_n_steps=3";
  expect_resumes_exactly(flags, "a");
}

TEST(E2eFp8Recipes, StatisticsGoToTheMetrics) {
  const std::string out = fresh_dir("stats");
  RunResult r = run(train_args(2, 3) + " checkpoint.save_every_n_steps=0 output_dir=" + out +
                    " fp8_config.enabled=true fp8_config.fp8_recipe=DelayedScaling fp8_config.stats_interval=1");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto m = read_metrics(out + "/metrics.jsonl");
  ASSERT_EQ(m.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    for (const char* layer : {"layer_01", "layer_02"})
      for (const char* t : {"qkv/input", "qkv/weight", "qkv/grad", "out/input", "mlp_in/weight", "mlp_out/grad"}) {
        const std::string k = std::string("fp8/") + layer + "/" + t + "/";
        ASSERT_TRUE(m[i].contains(k + "amax")) << k << " " << m[i].dump();
        EXPECT_GT(m[i][k + "amax"].get<double>(), 0.0) << k;
        for (const char* f : {"underflow", "overflow"}) {
          EXPECT_GE(m[i][k + f].get<double>(), 0.0) << k << f;
          EXPECT_LE(m[i][k + f].get<double>(), 1.0) << k << f;
        }
        // Delayed scaling: scale 1 at the first step, then fp8_max / the previous step's amax
        // (E4M3 448 for inputs and weights, E5M2 57344 for gradients).
        const double fmax = std::string(t).find("grad") != std::string::npos ? 57344.0 : 448.0;
        const double want = i == 0 ? 1.0 : fmax / m[0][k + "amax"].get<double>();
        if (i == 1) EXPECT_NEAR(m[i][k + "scale"].get<double>(), want, 1e-5 * want) << k;
        if (i == 0) EXPECT_EQ(m[i][k + "scale"].get<double>(), 1.0) << k;
      }
  // Scale 1 at the first step leaves small weights partly below E4M3's smallest subnormal; the
  // delayed scale of the second step brings them into range.
  EXPECT_GT(m[0]["fp8/layer_01/qkv/weight/underflow"].get<double>(), 0.01);
  EXPECT_LT(m[1]["fp8/layer_01/qkv/weight/underflow"].get<double>(), 0.001);
  // Every stats_interval steps only.
  const std::string out2 = fresh_dir("stats2");
  RunResult r2 = run(train_args(2, 2) + " checkpoint.save_every_n_steps=0 output_dir=" + out2 +
                     " fp8_config.enabled=true fp8_config.stats_interval=2");
  ASSERT_EQ(r2.code, 0) << r2.output;
  const auto m2 = read_metrics(out2 + "/metrics.jsonl");
  ASSERT_EQ(m2.size(), 2u);
  EXPECT_FALSE(m2[0].contains("fp8/layer_01/qkv/input/amax"));
  EXPECT_TRUE(m2[1].contains("fp8/layer_01/qkv/input/amax"));
  EXPECT_GT(m2[1]["fp8/layer_01/qkv/input/scale"].get<double>(), 1.0);  // current scaling: 448 / amax
}

TEST(E2eFp8Recipes, SettingsThatCannotRunFailNamingTheKey) {
  const std::string base = train_args(2, 2) + " checkpoint.save_every_n_steps=0 output_dir=" + fresh_dir("bad");
  struct Case {
    std::string overrides, expect;
  };
  const std::vector<Case> cases = {
      {"fp8_config.enabled=true fp8_config.fp8_recipe_kwargs.amax_histroy_len=4", "amax_history_len"},
      {"fp8_config.enabled=true fp8_config.fp8_recipe_kwargs.amax_history_len=4",
       "amax_history_len is a parameter of DelayedScaling, not of fp8_config.fp8_recipe Float8CurrentScaling"},
      {"fp8_config.enabled=true fp8_config.fp8_recipe=Float8BlockScaling fp8_config.fp8_recipe_kwargs.fp8_dpa=true",
       "fp8_dpa=true takes a per-tensor recipe (DelayedScaling or Float8CurrentScaling)"},
      {"fp8_config.enabled=true fp8_config.fp8_recipe_kwargs.fp8_mha=true", "fp8_mha=true"},
      {"fp8_config.enabled=true fp4_config.enabled=true", "neither fp8_layers nor fp4_layers"},
      {"fp8_config.enabled=true 'fp8_layers=[3]'", "fp8_layers: layer 3 is not a layer number in [1, 2]"},
      {"fp8_config.enabled=true fp8_config.fp8_recipe=DelayedScalin", "fp8_config.fp8_recipe"},
      {"fp8_config.enabled=true fp8_config.fp8_recipe_kwargs.amax_compute_algo=mean", "amax_compute_algo"},
  };
  for (const Case& c : cases) {
    RunResult r = run(base + " " + c.overrides);
    EXPECT_NE(r.code, 0) << c.overrides;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.overrides << "\n" << r.output;
  }
}
