// Context parallelism on CPU processes (Gloo), as users run it: `biofm launch --nproc-per-node
// N train ... cp_size=C` (the recipes' key). A group of C ranks splits
// every sequence of its batches and trains exactly as one process on the whole batches (fp32:
// within 1e-5 per step, final models alike): ESM-2 with its token dropout (factors of whole
// sequences) and bidirectional attention, Llama with causal attention, and groups side by side
// under data parallelism; with activation recompute, padded (BSHD) batches and THD batches padded
// to a multiple; its checkpoints resume without it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e/cli_run.h"
#include "e2e/dist_run.h"

using namespace biofm::testkit;

namespace {

// A tiny Llama on the bundled DNA (fp32 CPU), one log record per step, validation every 3.
std::string tiny_llama_args(const std::string& out, int steps, int grad_acc) {
  return "train --config-dir " + src("configs") + " --config-name llama3_sanity output_dir=" + out +
         " dataset.path=" + src("data/dna_sample.fasta") + " dataset.val_path=" + src("data/dna_val.fasta") +
         " dataset.val_every_n_steps=3 dataset.val_max_batches=2 model.config.hidden_size=32"
         " model.config.num_hidden_layers=2 model.config.num_attention_heads=4 model.config.num_key_value_heads=2"
         " model.config.intermediate_size=64 dataset.max_seq_length=100 dataset.stride=16"
         " dataset.max_tokens_per_batch=400 logger.frequency=1 checkpoint.save_every_n_steps=0 num_threads=1"
         " scheduler.warmup_steps=2 grad_acc_steps=" +
         std::to_string(grad_acc) + " num_train_steps=" + std::to_string(steps);
}

// One process (`alone(dir)`) and a context-parallel launch (`group(dir)`), each into a fresh
// directory: both must succeed and give the same curve. Their records and directories back.
struct Runs {
  std::string one, group, group_output;
  std::vector<nlohmann::json> ra, rb;
};
template <class Alone, class Group>
Runs train_both(const std::string& tag, Alone alone, Group group) {
  Runs r{fresh_dir(tag + "_one"), fresh_dir(tag + "_group"), "", {}, {}};
  RunResult a = run_biofm(alone(r.one));
  EXPECT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm(group(r.group));
  EXPECT_EQ(b.code, 0) << b.output;
  r.group_output = b.output;
  r.ra = train_records(r.one + "/metrics.jsonl");
  r.rb = train_records(r.group + "/metrics.jsonl");
  expect_same_curve(r.rb, r.ra);
  return r;
}

}  // namespace

TEST(ContextParallel, TwoRanksSplittingEachSequenceTrainAsOneProcess) {
  const Runs r = train_both("cp_esm", [](const std::string& d) { return tiny_args(d, 6, 1); },
                            [](const std::string& d) { return launch(2) + tiny_args(d, 6, 1) + " cp_size=2"; });
  EXPECT_NE(r.group_output.find("context parallel in groups of 2 ranks (1 data-parallel)"), std::string::npos)
      << r.group_output;
  ASSERT_EQ(r.rb.size(), 6u);
  expect_same_tensors(r.group + "/final_model/model.safetensors", r.one + "/final_model/model.safetensors");
  // Each token trained once over the group (ranks that each took the whole batch would double it
  // and still give the same mean loss).
  for (size_t i = 0; i < r.rb.size(); ++i)
    EXPECT_EQ(r.rb[i]["unpadded_tokens_per_step"], r.ra[i]["unpadded_tokens_per_step"]) << "step " << i + 1;
}

// Recompute runs each layer's forward (and its gathers) again in backward; padded batches put
// padding inside slots, which the split pads further.
TEST(ContextParallel, RecomputeAndPaddedBatchesTrainAsOneProcess) {
  for (const std::string extra : {" recompute=true", " dataset.packing=bshd dataset.micro_batch_size=3",
                                  " dataset.pad_to_multiple_of=8"}) {
    SCOPED_TRACE(extra);
    train_both("cp_var", [&](const std::string& d) { return tiny_args(d, 4, 1) + extra; },
               [&](const std::string& d) { return launch(2) + tiny_args(d, 4, 1) + extra + " cp_size=2"; });
  }
}

TEST(ContextParallel, CausalAttentionOverSplitSequencesTrainsAsOneProcess) {
  const Runs r = train_both("cp_llama", [](const std::string& d) { return tiny_llama_args(d, 6, 1); },
                            [](const std::string& d) { return launch(2) + tiny_llama_args(d, 6, 1) + " cp_size=2"; });
  ASSERT_EQ(r.rb.size(), 6u);
  expect_same_tensors(r.group + "/final_model/model.safetensors", r.one + "/final_model/model.safetensors");
}

TEST(ContextParallel, TwoGroupsOfTwoTrainAsOneProcessWithTwoMicroBatches) {
  const Runs r = train_both("cp_dp", [](const std::string& d) { return tiny_args(d, 4, 2); }, [](const std::string& d) {
    return launch(4) + tiny_args(d, 4, 1) + " cp_size=2 distributed.strategy=fsdp";
  });
  EXPECT_NE(r.group_output.find("context parallel in groups of 2 ranks (2 data-parallel)"), std::string::npos)
      << r.group_output;
  ASSERT_EQ(r.rb.size(), 4u);
  EXPECT_EQ(r.rb.back()["world_size"], 4);
}

// The data cursor is global and nothing of a checkpoint depends on the groups: steps 1-3 in a
// group of two, 4-6 in one process, as six steps in one process (a constant learning rate, so
// the stopped run has the six-step run's schedule).
TEST(ContextParallel, ResumesWithoutContextParallelism) {
  const std::string straight = fresh_dir("cp_straight"), moved = fresh_dir("cp_moved");
  const std::string constant = " scheduler.type=constant";
  RunResult a = run_biofm(tiny_args(straight, 6, 1) + constant);
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm(launch(2) + tiny_args(moved, 3, 1) + constant + " cp_size=2");
  ASSERT_EQ(b.code, 0) << b.output;
  RunResult c = run_biofm(tiny_args(moved, 6, 1) + constant);
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  expect_same_curve(train_records(moved + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
}

TEST(ContextParallel, GroupSizesThatCannotRunAreRefused) {
  const std::string dir = fresh_dir("cp_bad");
  RunResult three = run_biofm(launch(2) + tiny_args(dir, 2, 1) + " cp_size=3");
  EXPECT_EQ(three.code, 1) << three.output;
  EXPECT_NE(three.output.find("cp_size=3"), std::string::npos) << three.output;
  RunResult alone = run_biofm(tiny_args(dir, 2, 1) + " cp_size=2");
  EXPECT_EQ(alone.code, 1) << alone.output;
  EXPECT_NE(alone.output.find("this run has 1 rank(s)"), std::string::npos) << alone.output;
  RunResult zero = run_biofm(tiny_args(dir, 2, 1) + " cp_size=0");
  EXPECT_EQ(zero.code, 2) << zero.output;
  // Not built for the GPU yet: said before any work.
  RunResult gpu = run_biofm(tiny_args(dir, 2, 1) + " cp_size=2 device=cuda");
  EXPECT_EQ(gpu.code, 1) << gpu.output;
  EXPECT_NE(gpu.output.find("cp_size=2 with device=cuda"), std::string::npos) << gpu.output;
  // FP8 scales a tensor by its amax, which a group does not share yet: refused, not approximated.
  RunResult fp8 = run_biofm(launch(2) + tiny_args(dir, 2, 1) + " cp_size=2 fp8_config.enabled=true");
  EXPECT_EQ(fp8.code, 1) << fp8.output;
  EXPECT_NE(fp8.output.find("does not yet share the quantization's amax"), std::string::npos) << fp8.output;
}
