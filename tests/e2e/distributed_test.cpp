// Multi-process training on CPUs (Gloo), as users run it: `biofm launch --nproc-per-node N
// train ...`. The same science at any scale: N ranks × 1 micro batch trains exactly as 1 rank ×
// N micro batches (fp32: within 1e-5 per step) for every strategy; checkpoints resume on another
// number of ranks; a rank that dies is named by the others; a stop signal stops all ranks after
// the same step with a checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "biofm/io/safetensors.h"
#include "e2e/cli_run.h"
#include "e2e/dist_run.h"
#include "free_port.h"

namespace fs = std::filesystem;
using namespace biofm::testkit;

namespace {

class DistributedStrategy : public testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(DistributedStrategy, TwoRanksTrainAsOneRankWithTwoMicroBatches) {
  const std::string one = fresh_dir("dist_one_" + GetParam()), two = fresh_dir("dist_two_" + GetParam());
  // (3 validation batches: the ranks evaluate 2 and 1, so one rank sits a round out)
  RunResult a = run_biofm(tiny_args(one, 6, 2) + " dataset.val_max_batches=3");
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm(launch(2) + tiny_args(two, 6, 1) + " dataset.val_max_batches=3 distributed.strategy=" + GetParam());
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("distributed: 2 ranks"), std::string::npos) << b.output;
  const auto ra = train_records(one + "/metrics.jsonl"), rb = train_records(two + "/metrics.jsonl");
  ASSERT_EQ(rb.size(), 6u) << "rank 0 alone writes the metrics, one record per step";
  expect_same_curve(rb, ra);
  EXPECT_EQ(rb.back()["rank_tokens_per_sec"].size(), 2u);
  EXPECT_EQ(rb.back()["world_size"], 2);
  // One final model, from rank 0; it equals the single process's.
  expect_same_tensors(two + "/final_model/model.safetensors", one + "/final_model/model.safetensors");
  if (GetParam() != "ddp") {
    EXPECT_TRUE(fs::exists(two + "/checkpoints/step_6/optimizer-rank00000-of-00002.safetensors"));
    EXPECT_TRUE(fs::exists(two + "/checkpoints/step_6/optimizer-rank00001-of-00002.safetensors"));
    EXPECT_FALSE(fs::exists(two + "/checkpoints/step_6/optimizer.safetensors"));
  }
}

TEST_P(DistributedStrategy, OffloadedOptimizerStateTrainsTheSameAndItsCheckpointResumesWithoutIt) {
  // (a constant learning rate: a run stopped at step 3 has the schedule of the 6-step run)
  const auto args = [](const std::string& out, int steps, int grad_acc) {
    return tiny_args(out, steps, grad_acc) + " scheduler.type=constant";
  };
  const std::string straight = fresh_dir("offload_straight_" + GetParam()), run = fresh_dir("offload_" + GetParam());
  RunResult a = run_biofm(args(straight, 6, 2));
  ASSERT_EQ(a.code, 0) << a.output;
  // Steps 1-3 with the optimizer state offloaded (device=cpu runs the same code, memcpy for the
  // transfers), 4-6 from its checkpoint without.
  RunResult b = run_biofm(launch(2) + args(run, 3, 1) + " optimizer.offload=true distributed.strategy=" + GetParam());
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("optimizer state offloaded to host memory"), std::string::npos) << b.output;
  RunResult c = run_biofm(launch(2) + args(run, 6, 1) + " distributed.strategy=" + GetParam());
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  EXPECT_EQ(c.output.find("offloaded"), std::string::npos) << c.output;
  expect_same_curve(train_records(run + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
  expect_same_tensors(run + "/final_model/model.safetensors", straight + "/final_model/model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Strategies, DistributedStrategy, testing::Values("ddp", "zero1", "zero2", "fsdp"));

TEST(Distributed, OneProcessResumesWithTheOptimizerStateOffloaded) {
  const auto args = [](const std::string& out, int steps) {
    return tiny_args(out, steps, 2) + " scheduler.type=constant";
  };
  const std::string straight = fresh_dir("offload_one_straight"), run = fresh_dir("offload_one");
  ASSERT_EQ(run_biofm(args(straight, 6)).code, 0);
  ASSERT_EQ(run_biofm(args(run, 3)).code, 0);
  RunResult b = run_biofm(args(run, 6) + " optimizer.offload=true");
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("resumed from"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("optimizer state offloaded to host memory"), std::string::npos) << b.output;
  expect_same_curve(train_records(run + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
}

namespace {
class DistributedBf16Reduce : public testing::TestWithParam<std::string> {};
}  // namespace

// bf16_reduce rounds every gradient (and each partial sum) to bf16: the curve follows the fp32
// reduction's within bf16 rounding, and differs from it (the bf16 path ran).
TEST_P(DistributedBf16Reduce, FollowsTheFp32CurveWithinBf16Rounding) {
  const std::string fp32 = fresh_dir("bf16_reduce_off_" + GetParam()), bf16 = fresh_dir("bf16_reduce_on_" + GetParam());
  const std::string strategy = " distributed.strategy=" + GetParam();
  RunResult a = run_biofm(launch(2) + tiny_args(fp32, 6, 2) + strategy);
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm(launch(2) + tiny_args(bf16, 6, 2) + strategy + " distributed.bf16_reduce=true");
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("bf16 gradient reduction"), std::string::npos) << b.output;
  const auto ra = train_records(fp32 + "/metrics.jsonl"), rb = train_records(bf16 + "/metrics.jsonl");
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), ra.size());
  size_t differing = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    for (const char* k : {"loss", "grad_norm"}) {
      const double x = rb[i][k].get<double>(), y = ra[i][k].get<double>();
      // Half a bf16 ulp (2^-9 ≈ 2e-3 relative) bounds each gradient element's rounding; the
      // norms and losses average it out (measured here: ~1e-4 and ~1e-6 over 12 steps).
      EXPECT_LE(std::abs(x - y), 2e-3 * std::abs(y)) << k << " at step " << ra[i]["step"] << ": " << x << " vs " << y;
      if (x != y) ++differing;
    }
  }
  EXPECT_GT(differing, 0u) << "bf16 reduction gave the fp32 curve bit for bit: its path did not run";
}

INSTANTIATE_TEST_SUITE_P(Strategies, DistributedBf16Reduce, testing::Values("ddp", "zero2", "fsdp"));

// zero2 and fsdp reduce every micro batch's gradients into the owners' shards (no rank holds a
// whole gradient): with accumulation, 2 ranks x 2 micro batches are still 1 rank x 4.
TEST(Distributed, ShardedGradientsAccumulateOverMicroBatches) {
  const std::string one = fresh_dir("dist_acc_one");
  RunResult a = run_biofm(tiny_args(one, 4, 4));
  ASSERT_EQ(a.code, 0) << a.output;
  for (const std::string s : {"zero2", "fsdp"}) {
    const std::string two = fresh_dir("dist_acc_two_" + s);
    RunResult b = run_biofm(launch(2) + tiny_args(two, 4, 2) + " distributed.strategy=" + s);
    ASSERT_EQ(b.code, 0) << b.output;
    expect_same_curve(train_records(two + "/metrics.jsonl"), train_records(one + "/metrics.jsonl"));
  }
}

// A two-rank run's step-3 checkpoint continued by one process without grad_acc_steps=2 halves
// the global batch: the resume says so, with the setting that keeps it.
template <class Args>
void expect_halved_batch_note(const std::string& step3, const std::string& name, const Args& tiny_args) {
  const std::string halved = fresh_dir(name);
  fs::remove_all(halved);
  fs::create_directories(halved + "/checkpoints");
  fs::copy(step3, halved + "/checkpoints/step_3", fs::copy_options::recursive);
  RunResult h1 = run_biofm(tiny_args(halved, 4, 1));
  ASSERT_EQ(h1.code, 0) << h1.output;
  EXPECT_NE(h1.output.find("note: the checkpoint's run took 2 batches per optimizer step (2 data-parallel rank(s) x "
                           "grad_acc_steps=1); this run takes 1 (1 x 1): the global batch changes (grad_acc_steps=2 "
                           "keeps it)"),
            std::string::npos)
      << h1.output;
}

TEST(Distributed, ResumesOnAnotherNumberOfRanks) {
  // (a constant learning rate: a run stopped at step 3 by num_train_steps=3 has the schedule
  // of the 6-step run)
  const auto tiny_args = [](const std::string& out, int steps, int grad_acc) {
    return ::tiny_args(out, steps, grad_acc) + " scheduler.type=constant";
  };
  const std::string straight = fresh_dir("dist_straight"), moved = fresh_dir("dist_moved");
  RunResult a = run_biofm(tiny_args(straight, 6, 2));
  ASSERT_EQ(a.code, 0) << a.output;
  // Steps 1-3 on two ranks with sharded optimizer state, then 4-6 on one process.
  RunResult b = run_biofm(launch(2) + tiny_args(moved, 3, 1) + " distributed.strategy=zero2");
  ASSERT_EQ(b.code, 0) << b.output;
  RunResult c = run_biofm(tiny_args(moved, 6, 2));
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  EXPECT_EQ(c.output.find("the global batch changes"), std::string::npos) << c.output;  // (2 x 1 = 1 x 2)
  expect_same_curve(train_records(moved + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
  // The same checkpoint continued by one process without grad_acc_steps=2 halves the global
  // batch: said, with the setting that keeps it.
  expect_halved_batch_note(moved + "/checkpoints/step_3", "dist_halved", tiny_args);
  // And back: one process's checkpoint continued on two ranks.
  const std::string back = fresh_dir("dist_back");
  RunResult d = run_biofm(tiny_args(back, 3, 2));
  ASSERT_EQ(d.code, 0) << d.output;
  RunResult e = run_biofm(launch(2) + tiny_args(back, 6, 1) + " distributed.strategy=zero1");
  ASSERT_EQ(e.code, 0) << e.output;
  expect_same_curve(train_records(back + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
  // Fully sharded: steps 1-3 on two ranks, 4-6 on one process; and one process's checkpoint
  // continued fully sharded.
  const std::string sharded = fresh_dir("dist_fsdp_moved");
  RunResult f = run_biofm(launch(2) + tiny_args(sharded, 3, 1) + " distributed.strategy=fsdp");
  ASSERT_EQ(f.code, 0) << f.output;
  {
    // Its checkpoint holds each rank's part of the masters (nothing gathered); eval reads the
    // step directory from those parts and agrees with the gathered final export exactly.
    const std::string step = sharded + "/checkpoints/step_3";
    EXPECT_TRUE(fs::exists(step + "/model-rank00000-of-00002.safetensors"));
    EXPECT_TRUE(fs::exists(step + "/model-rank00001-of-00002.safetensors"));
    EXPECT_FALSE(fs::exists(step + "/model.safetensors"));
    auto eval_loss = [&](const std::string& model, const std::string& out) {
      RunResult r = run_biofm("eval --model " + model + " --input " + src("data/proteins_val.fasta") +
                              " --device cpu --precision fp32 --output " + out);
      EXPECT_EQ(r.code, 0) << r.output;
      std::ifstream in(out);
      return in ? nlohmann::json::parse(in).value("loss", -1.0) : -2.0;
    };
    const double shards = eval_loss(step, sharded + "/eval_step3.json");
    EXPECT_GT(shards, 0.0);
    EXPECT_EQ(shards, eval_loss(sharded + "/final_model", sharded + "/eval_final.json"));
  }
  RunResult g = run_biofm(tiny_args(sharded, 6, 2));
  ASSERT_EQ(g.code, 0) << g.output;
  expect_same_curve(train_records(sharded + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
  const std::string sharded_back = fresh_dir("dist_fsdp_back");
  ASSERT_EQ(run_biofm(tiny_args(sharded_back, 3, 2)).code, 0);
  RunResult h = run_biofm(launch(2) + tiny_args(sharded_back, 6, 1) + " distributed.strategy=fsdp");
  ASSERT_EQ(h.code, 0) << h.output;
  expect_same_curve(train_records(sharded_back + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
}

TEST(Distributed, StreamedDataResumesOnAnotherNumberOfRanks) {
  // dataset.streaming: every rank streams the files and skips the others' batches, so two ranks
  // × one micro batch train as one process × two, and the cursor resumes on either count.
  const auto tiny_args = [](const std::string& out, int steps, int grad_acc) {
    return ::tiny_args(out, steps, grad_acc) + " scheduler.type=constant dataset.streaming=true dataset.shuffle_buffer=100";
  };
  const std::string straight = fresh_dir("dist_stream_straight"), moved = fresh_dir("dist_stream_moved");
  RunResult a = run_biofm(tiny_args(straight, 6, 2));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.output.find("streamed from 1 file, shuffle buffer 100"), std::string::npos) << a.output;
  RunResult b = run_biofm(launch(2) + tiny_args(moved, 3, 1));
  ASSERT_EQ(b.code, 0) << b.output;
  RunResult c = run_biofm(tiny_args(moved, 6, 2));
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  EXPECT_EQ(c.output.find("the global batch changes"), std::string::npos) << c.output;  // (2 x 1 = 1 x 2)
  expect_same_curve(train_records(moved + "/metrics.jsonl"), train_records(straight + "/metrics.jsonl"));
  // The same checkpoint continued by one process without grad_acc_steps=2 halves the global
  // batch: said, with the setting that keeps it.
  expect_halved_batch_note(moved + "/checkpoints/step_3", "dist_stream_halved", tiny_args);
}

TEST(Distributed, ARankThatDiesIsNamedAndTheOthersStop) {
  const std::string dir = fresh_dir("dist_death");
  const int port = next_port();
  // Two ranks started by hand (as torchrun would), without biofm launch's supervision: rank 1 is
  // killed once training runs; rank 0 must stop with an error naming it, not hang.
  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
  const std::string args = tiny_args(dir, 100000, 1) + " checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false";
  const std::string script =
      "cd " + dir + " && (" + env + " RANK=1 LOCAL_RANK=1 " + BIOFM_BINARY + " " + args + " > rank1.log 2>&1 & echo $! > rank1.pid) && " +
      "(for i in $(seq 600); do grep -q '\"step\":3' " + dir + "/metrics.jsonl 2>/dev/null && break; sleep 0.2; done; kill -9 $(cat rank1.pid)) & " +
      "start=$(date +%s); " + env + " RANK=0 LOCAL_RANK=0 timeout 120 " + BIOFM_BINARY + " " + args +
      "; code=$?; echo \"rank0 exit $code after $(( $(date +%s) - start )) s\"";
  RunResult r = sh("(" + script + ")");
  // (in the format of every error, which it lacked: "error: rank 1 exited ...")
  EXPECT_NE(r.output.find("biofm train: error: rank 1 exited"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("rank0 exit 0 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("rank0 exit 124"), std::string::npos) << "rank 0 hung: " << r.output;
}

// Under biofm launch, a rank killed outright is the one named (and its signal gives the exit
// code), not rank 0, which exits 1 moments later when the connection closes: both may end
// before the launcher looks, and waitpid returns the lower rank first. ([b]iofm: see below)
TEST(Distributed, ALaunchedRankKilledIsTheOneNamed) {
  const std::string dir = fresh_dir("dist_rank_killed");
  const std::string cmd = std::string(BIOFM_BINARY) + " " + launch(2) + tiny_args(dir, 100000, 1) +
                          " checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false";
  const std::string rank1 = "$(for p in $(pgrep -f '[b]iofm train .*output_dir=" + dir + " '); do "
                            "tr '\\0' '\\n' < /proc/$p/environ | grep -qx 'RANK=1' && echo $p; done)";
  const std::string script = "cd " + dir + " && (" + cmd + " > run.log 2>&1; echo \"exit $?\" >> run.log) & " +
                             "for i in $(seq 600); do grep -q '\"step\":3' " + dir + "/metrics.jsonl 2>/dev/null && break; sleep 0.2; done; " +
                             "kill -9 " + rank1 + "; wait; cat " + dir + "/run.log";
  RunResult r = sh(script);
  EXPECT_NE(r.output.find("launch: rank 1 was killed by signal 9"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exit 137"), std::string::npos) << r.output;
}

// How a stop reaches the ranks of `biofm launch`: to the launcher alone (`kill PID`), to its
// whole process group (Ctrl-C in a terminal, Slurm signalling a job step: every rank gets it
// twice, straight and passed on), or as Slurm's preemption warning SIGUSR1.
class DistributedStop : public ::testing::TestWithParam<std::string> {};

TEST_P(DistributedStop, StopsAllRanksWithACheckpointAndTheSameCommandResumes) {
  const std::string how = GetParam();
  const std::string dir = fresh_dir("dist_stop_" + how);
  const std::string cmd = std::string(BIOFM_BINARY) + " " + launch(2) + tiny_args(dir, 100000, 1) +
                          " checkpoint.save_every_n_steps=0";
  const std::string pid = "$(cat " + dir + "/launcher.pid)";
  const std::string sig = how == "group_int" ? "INT" : how == "usr1" ? "USR1" : "TERM";
  // (bash's kill: the shell of sh() may not take "--" before a negative process group id)
  const std::string kill = how == "group_int" ? "bash -c 'kill -INT -- -" + pid + "'" : "kill -" + sig + " " + pid;
  // (setsid: the launcher leads a process group of its own, which the signal can name)
  const std::string script = "cd " + dir + " && (setsid " + cmd + " > run.log 2>&1 & echo $! > launcher.pid; wait $!; echo \"exit $?\" >> run.log) & " +
                             "for i in $(seq 600); do grep -q '\"step\":4' " + dir + "/metrics.jsonl 2>/dev/null && break; sleep 0.2; done; " +
                             kill + "; wait; sleep 1; cat " + dir + "/run.log";
  RunResult r = sh(script);
  EXPECT_NE(r.output.find("stopped by signal"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exit 0"), std::string::npos) << r.output;
  // One stop, said once (rank 0), though every rank got the signal.
  const std::string said = "stopping after this step";
  const size_t first = r.output.find(said);
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(said, first + 1), std::string::npos) << r.output;
  int64_t saved = -1;
  for (auto& e : fs::directory_iterator(dir + "/checkpoints"))
    if (e.path().filename().string().rfind("step_", 0) == 0) saved = std::stoll(e.path().filename().string().substr(5));
  ASSERT_GE(saved, 4) << r.output;
  RunResult again = run_biofm(launch(2) + tiny_args(dir, int(saved) + 2, 1) + " checkpoint.save_every_n_steps=0");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("resumed from"), std::string::npos) << again.output;
}

INSTANTIATE_TEST_SUITE_P(Signals, DistributedStop, ::testing::Values("term", "group_int", "usr1"));

// A launcher killed outright (SIGKILL: it cannot pass the stop on) still stops its ranks: they
// get SIGTERM from the kernel, write a checkpoint and exit, instead of training on orphaned.
// ([b]iofm: a pattern that does not match the shell running it)
TEST(Distributed, RanksOfAKilledLauncherStopWithACheckpoint) {
  const std::string dir = fresh_dir("dist_launcher_killed");
  const std::string cmd = std::string(BIOFM_BINARY) + " " + launch(2) + tiny_args(dir, 100000, 1) +
                          " checkpoint.save_every_n_steps=0";
  const std::string script =
      "cd " + dir + " && (setsid " + cmd + " > run.log 2>&1 & echo $! > launcher.pid; wait $!) & " +
      "for i in $(seq 600); do grep -q '\"step\":4' " + dir + "/metrics.jsonl 2>/dev/null && break; sleep 0.2; done; " +
      "kill -KILL $(cat " + dir + "/launcher.pid); wait; " +
      "for i in $(seq 300); do pgrep -f '[b]iofm train .*output_dir=" + dir + " ' > /dev/null || break; sleep 0.2; done; " +
      "pgrep -f '[b]iofm train .*output_dir=" + dir + " ' > /dev/null && echo RANKS-STILL-RUNNING; cat " + dir + "/run.log";
  RunResult r = sh(script);
  EXPECT_EQ(r.output.find("RANKS-STILL-RUNNING"), std::string::npos) << r.output;
  int64_t saved = -1;
  for (auto& e : fs::directory_iterator(dir + "/checkpoints"))
    if (e.path().filename().string().rfind("step_", 0) == 0) saved = std::stoll(e.path().filename().string().substr(5));
  EXPECT_GE(saved, 4) << r.output;
}

// Ranks started by hand with different configs fail at the rendezvous naming the keys (they
// aborted inside Gloo when the shapes differed, or trained diverging replicas when only the lr
// did); a path of a rank's own (another mount) is not compared.
TEST(Distributed, RanksWithDifferentConfigsFailNamingTheKeys) {
  const std::string dir = fresh_dir("dist_configs");
  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(next_port());
  const std::string base = std::string(BIOFM_BINARY) + " " + tiny_args(dir, 3, 1);
  RunResult r = sh("(" + env + " RANK=0 LOCAL_RANK=0 timeout 120 " + base + " optimizer.lr=0.001 > " + dir + "/r0.log 2>&1; "
                   "echo \"rank0 exit $?\" >> " + dir + "/r0.log) & " + env + " RANK=1 LOCAL_RANK=1 timeout 120 " + base +
                   " optimizer.lr=0.01 model.config.intermediate_size=128 > " + dir + "/r1.log 2>&1; echo \"rank1 exit $?\"; "
                   "wait; cat " + dir + "/r0.log " + dir + "/r1.log");
  EXPECT_NE(r.output.find("rank0 exit 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank1 exit 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the ranks were given different configs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: optimizer.lr=0.01 (rank 0: 0.001)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: model.config.intermediate_size=128"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("gloo"), std::string::npos) << r.output;
}

TEST(Distributed, ARankThatNeverArrivesFailsTheRendezvousInTime) {
  // Rank 0 alone of two, with distributed.rendezvous_timeout_s=2: a clear error naming rank 1
  // within seconds, not the default 300 s.
  const std::string dir = fresh_dir("dist_rendezvous");
  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(next_port());
  RunResult r = sh("(start=$(date +%s); " + env + " timeout 60 " + BIOFM_BINARY + " " + tiny_args(dir, 3, 1) +
                   " distributed.rendezvous_timeout_s=2; code=$?; echo \"rank0 exit $code after $(( $(date +%s) - start )) s\") 2>&1");
  EXPECT_NE(r.output.find("rank(s) 1 of 2 never arrived within 2.0 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank0 exit 1 "), std::string::npos) << r.output;
}

// profiler.range_times: each rank times its ranges over the window and writes them; rank 0
// prints the table. The gradient path's collectives are among them (zero2: reductions to owners).
TEST(Distributed, EachRankWritesTheRangeTimesOfTheProfilerWindow) {
  const std::string out = fresh_dir("dist_range_times");
  RunResult r = run_biofm(launch(2) + tiny_args(out, 4, 1) +
                          " distributed.strategy=zero2 profiler.start_step=2 profiler.end_step=3 profiler.range_times=true");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("range times of steps 2-3 (rank 0; wall clock)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("layer * backward"), std::string::npos) << r.output;
  for (int rank : {0, 1}) {
    std::ifstream f(out + "/range_times_rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(f.good()) << "rank " << rank;
    const nlohmann::json j = nlohmann::json::parse(f);
    EXPECT_EQ(j["rank"], rank);
    EXPECT_EQ(j["first_step"], 2);
    EXPECT_EQ(j["last_step"], 3);
    std::map<std::string, nlohmann::json> by_name;
    for (const auto& row : j["ranges"]) by_name[row["name"].get<std::string>()] = row;
    for (const char* name : {"train_step", "layer 1 backward", "attention backward", "sdpa backward", "mlp forward",
                             "optimizer", "gradient_sync", "gloo reduce"})
      ASSERT_TRUE(by_name.count(name)) << name << " missing on rank " << rank << ": " << j.dump();
    EXPECT_EQ(by_name["train_step"]["calls"], 2);
    EXPECT_GT(by_name["train_step"]["total_ms"].get<double>(), by_name["layer 1 backward"]["total_ms"].get<double>());
  }
}
