// AdamW with its state offloaded to host memory (AdamWConfig::offload). On the CPU backend the
// same code runs with plain host buffers, so these tests check the data flow: what goes to the
// host, the update there, what comes back, the skip on non-finite gradients, grad_divisor and
// clipping, a sharded optimizer, and checkpoints written with offload resuming without it and
// the other way round. (tests/cuda/optim_offload_test.cpp runs the same on a GPU.)
#include <gtest/gtest.h>

#include <array>
#include <barrier>
#include <cmath>
#include <filesystem>
#include <limits>
#include <thread>

#include "biofm/dist/comm.h"
#include "biofm/models/esm2/model.h"
#include "biofm/train/checkpoint.h"
#include "biofm/train/optimizer.h"
#include "train/recording_comm.h"
#include "models/tiny_models.h"

using namespace biofm;

namespace {

std::string fresh_dir(const std::string& name) {
  std::string d = testing::TempDir() + "/biofm_offload_" + name;
  std::filesystem::remove_all(d);
  return d;
}

std::vector<ParamSpec> specs() {
  std::vector<ParamSpec> s(3);
  s[0] = {"w", {40, 30}};
  s[1] = {"b", {30}, Init::Zeros};
  s[1].decay = false;
  s[2] = {"v", {1000}};
  return s;
}

// Deterministic gradients for step t (some large, so clipping engages).
void fill_grads(ParamStore& ps, int t) {
  Tensor g = ps.grad_flat();
  for (int64_t i = 0; i < g.numel(); ++i) g.f32()[i] = float(std::sin(0.37 * double(i) + t)) * (i % 7 == 0 ? 40.f : 1.f);
}

void expect_equal(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  const Tensor x = a.to(DType::F32), y = b.to(DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.f32()[i], y.f32()[i]) << what << " [" << i << "]";
}

// Trains two stores from the same start, one optimizer offloaded: steps with clipping and a
// grad_divisor, one with a NaN gradient (skipped), and checks that parameters, compute copy,
// moments and norms agree exactly after every step.
void train_both(bool compute_copy, Communicator* comm) {
  ParamStore on(specs(), Device::CPU), off(specs(), Device::CPU);
  for (ParamStore* ps : {&on, &off}) {
    ps->init(5);
    if (compute_copy) ps->enable_compute_copy();
  }
  AdamWConfig cfg;
  cfg.max_grad_norm = 0.5f;
  AdamWConfig offload_cfg = cfg;
  offload_cfg.offload = true;
  AdamW ref(off, cfg, comm), host(on, offload_cfg, comm);
  ASSERT_TRUE(host.offloaded());
  ASSERT_FALSE(ref.offloaded());
  const int64_t n = host.shard().second - host.shard().first;
  const int64_t master = compute_copy ? on.numel() * 4 : 0;  // (the whole store's masters move)
  EXPECT_EQ(host.offloaded_bytes(), n * 8 + master);
  if (compute_copy) EXPECT_NE(on.flat().raw(), off.flat().raw());
  const Tensor divisor = Tensor::from_f32({1}, {3.0f});
  for (int t = 1; t <= 5; ++t) {
    fill_grads(on, t);
    fill_grads(off, t);
    const int64_t first = host.shard().first;  // (sharded: only this rank's shard changes)
    if (t == 3) on.grad_flat().f32()[first + 17] = off.grad_flat().f32()[first + 17] = std::numeric_limits<float>::quiet_NaN();
    const Tensor before = on.flat().clone();
    ref.step(1e-2f, divisor);
    host.step(1e-2f, divisor);
    if (t != 3) EXPECT_EQ(host.read_grad_norm(), ref.read_grad_norm()) << "step " << t;
    expect_equal(on.flat(), off.flat(), "masters");
    if (compute_copy) expect_equal(on.compute_flat(), off.compute_flat(), "compute copy");
    for (const char* k : {"exp_avg", "exp_avg_sq"}) expect_equal(host.moment(k), ref.moment(k), k);
    if (t == 3) {
      EXPECT_FALSE(std::isfinite(host.read_grad_norm()));
      expect_equal(on.flat(), before, "parameters after a skipped step");
    } else {
      EXPECT_NE(on.flat().f32()[first], before.f32()[first]) << "step " << t << " changed nothing";
    }
  }
}

}  // namespace

TEST(OffloadedAdamW, UpdatesExactlyAsTheDeviceStateDoes) {
  train_both(/*compute_copy=*/false, nullptr);
}

TEST(OffloadedAdamW, MovesTheMastersOfAMixedPrecisionStore) {
  train_both(/*compute_copy=*/true, nullptr);
}

TEST(OffloadedAdamW, ShardedHoldsOnlyItsShardOfTheMoments) {
  for (int rank : {0, 1}) {
    testkit::RecordingComm comm(rank, 2);
    train_both(/*compute_copy=*/true, &comm);
  }
}

namespace {

// Parameter by parameter (the alignment padding between them is not in checkpoints): masters
// and compute copy.
void expect_equal_params(const ParamStore& a, const ParamStore& b, const char* when) {
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a.spec(i).name + " " + when);
    expect_equal(a.param(i), b.param(i), "masters");
    expect_equal(a.weight(i), b.weight(i), "compute copy");
  }
}

}  // namespace

TEST(OffloadedAdamW, CheckpointsResumeWithOrWithoutOffload) {
  for (bool save_offloaded : {true, false}) {
    const std::string dir = fresh_dir(save_offloaded ? "offload_ckpt_on" : "offload_ckpt_off");
    Esm2Model model(testkit::tiny_esm2_config(), Device::CPU);
    model.params().init(11);
    model.params().enable_compute_copy();
    AdamWConfig cfg;
    cfg.offload = save_offloaded;
    AdamW opt(model.params(), cfg);
    for (int t = 1; t <= 2; ++t) {
      fill_grads(model.params(), t);
      opt.step(1e-3f);
    }
    save_training_checkpoint(dir, TrainerState{2, 20, "{}", "seed: 1\n"}, model, opt, 2);

    Esm2Model fresh(testkit::tiny_esm2_config(), Device::CPU);
    fresh.params().enable_compute_copy();
    AdamWConfig fresh_cfg;
    fresh_cfg.offload = !save_offloaded;
    AdamW fresh_opt(fresh.params(), fresh_cfg);
    ASSERT_TRUE(resume_training_checkpoint(dir, fresh, fresh_opt).has_value());
    EXPECT_EQ(fresh_opt.steps_taken(), 2);
    expect_equal_params(fresh.params(), model.params(), "after resuming");
    for (const char* k : {"exp_avg", "exp_avg_sq"}) expect_equal(fresh_opt.moment(k), opt.moment(k), k);
    // And the next step agrees.
    fill_grads(model.params(), 3);
    fill_grads(fresh.params(), 3);
    opt.step(1e-3f);
    fresh_opt.step(1e-3f);
    expect_equal_params(fresh.params(), model.params(), "after the next step");
  }
}

namespace {

// Two ranks as two threads of this process: all-reduce and broadcast through shared memory.
struct ThreadHub {
  std::barrier<> meet{2};
  std::array<Tensor*, 2> posted{};
};

class ThreadComm : public Communicator {
 public:
  ThreadComm(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return 2; }
  std::string name() const override { return "threads"; }
  void all_reduce_sum(Tensor& t) override {
    post(t);
    Tensor sum = hub_.posted[0]->clone();
    for (int64_t i = 0; i < sum.numel(); ++i) sum.f32()[i] += hub_.posted[1]->f32()[i];
    hub_.meet.arrive_and_wait();  // (both have read before either writes)
    t.copy_from(sum);
    hub_.meet.arrive_and_wait();
  }
  void broadcast(Tensor& t, int root) override {
    post(t);
    if (rank_ != root) t.copy_from(*hub_.posted[size_t(root)]);
    hub_.meet.arrive_and_wait();
  }
  void reduce_sum(Tensor&, int) override { fail("ThreadComm: reduce_sum is not used here"); }
  void broadcast_from(const Tensor&, Tensor&, int) override { fail("ThreadComm: broadcast_from is not used here"); }
  void reduce_sum_to(const Tensor&, Tensor&, int) override { fail("ThreadComm: reduce_sum_to is not used here"); }

 private:
  void post(Tensor& t) {
    hub_.posted[size_t(rank_)] = &t;
    hub_.meet.arrive_and_wait();
  }
  ThreadHub& hub_;
  int rank_;
};

// zero1 on two ranks, bf16-mixed store: each rank's masters after 3 steps and gather_params.
std::array<Tensor, 2> zero_masters(bool offload, bool gather) {
  ThreadHub hub;
  std::array<Tensor, 2> out;
  auto rank_main = [&](int rank) {
    ThreadComm comm(hub, rank);
    ParamStore ps(specs(), Device::CPU);
    ps.init(5);
    ps.enable_compute_copy();
    AdamWConfig cfg;
    cfg.offload = offload;
    AdamW opt(ps, cfg, &comm);
    for (int t = 1; t <= 3; ++t) {
      fill_grads(ps, t);
      opt.step(1e-2f);
    }
    if (gather) opt.gather_params();
    out[size_t(rank)] = ps.flat().clone();
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  return out;
}

}  // namespace

// Offloaded zero1/zero2 masters live on the host, every rank's whole copy: a checkpoint's
// gather_params must bring each rank the others' updated shards (through device staging on GPUs).
TEST(OffloadedAdamW, ZeroGathersEveryRanksHostMasters) {
  const std::array<Tensor, 2> want = zero_masters(false, true), got = zero_masters(true, true);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    expect_equal(got[size_t(r)], want[0], "gathered masters");
  }
  // Without the gather, rank 0's copy of rank 1's shard is still the initial one.
  const std::array<Tensor, 2> stale = zero_masters(true, false);
  const int64_t last = stale[0].numel() - 1;  // (in rank 1's shard, a weight of "v")
  EXPECT_NE(stale[0].f32()[last - 20], want[0].f32()[last - 20]);
}
