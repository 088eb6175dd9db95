// Gloo (Debian's libgloo-dev, the library PyTorch's CPU backend uses) over TCP: the CPU
// processes' collectives. Gloo finds its peers through a key-value store; ours is the
// coordinator's.
#include "biofm/core/range_timer.h"
#include "biofm/dist/comm.h"

#include "biofm/dist/coordinator.h"

#if BIOFM_WITH_GLOO
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <csignal>
#include <cstdlib>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace biofm {

namespace {

// Gloo's Store on the coordinator's key-value store.
class CoordinatorStore : public gloo::rendezvous::Store {
 public:
  explicit CoordinatorStore(Coordinator& c) : c_(c) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    c_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = c_.get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, std::chrono::seconds(300)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& k : keys) c_.get(k, timeout);
  }

 private:
  Coordinator& c_;
};

void sum_f32(void* out, const void* a, const void* b, size_t n) {
  float* o = static_cast<float*>(out);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

// BF16 (bf16_reduce): each addition in fp32, rounded to bf16, as NCCL's bf16 sum does.
void sum_bf16(void* out, const void* a, const void* b, size_t n) {
  bf16* o = static_cast<bf16*>(out);
  const bf16* x = static_cast<const bf16*>(a);
  const bf16* y = static_cast<const bf16*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = f32_to_bf16(bf16_to_f32(x[i]) + bf16_to_f32(y[i]));
}

// Points options o (Gloo's all-reduce or reduce) in place at t, F32 or BF16, summed.
template <class Options>
void set_sum(Options& o, Tensor& t, const char* what) {
  if (t.device() != Device::CPU || (t.dtype() != DType::F32 && t.dtype() != DType::BF16))
    fail("gloo ", what, ": needs an F32 or BF16 CPU tensor, got ", t.describe());
  const size_t n = size_t(t.numel());
  if (t.dtype() == DType::F32) {
    o.setInput(t.f32(), n);
    o.setOutput(t.f32(), n);
    o.setReduceFunction(sum_f32);
  } else {
    o.setInput(t.bf(), n);
    o.setOutput(t.bf(), n);
    o.setReduceFunction(sum_bf16);
  }
}

class GlooCommunicator : public Communicator {
 public:
  // The ranks of one group (every rank of the run, or a subgroup: context parallelism) find
  // each other under their own prefix of the store.
  GlooCommunicator(Coordinator& coord, bool single_host, const std::string& prefix, int rank, int size) {
    // Gloo writes to its peers' sockets without MSG_NOSIGNAL: a peer that died would kill this
    // rank with SIGPIPE (exit 141, no message) before the coordinator names the dead rank.
    // Ignored, the write fails with EPIPE and the failure is reported (PyTorch runs Gloo in a
    // Python process, which ignores SIGPIPE from the start).
    std::signal(SIGPIPE, SIG_IGN);
    gloo::transport::tcp::attr attr;
    // GLOO_SOCKET_IFNAME as in PyTorch; one host: loopback; else this host's name.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
      attr.iface = ifname;
    } else if (single_host) {
      attr.hostname = "127.0.0.1";
    } else {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      attr.hostname = host;
    }
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // (before connecting: Gloo waits for its peers' addresses that long, 30 s by default, and a
    // group may connect after its ranks built or loaded the model, which takes them unequal times)
    ctx->setTimeout(std::chrono::minutes(30));
    CoordinatorStore store(coord);
    gloo::rendezvous::PrefixStore prefixed(prefix, store);
    try {
      ctx->connectFullMesh(prefixed, device);
    } catch (const std::exception& e) {
      fail("gloo: connecting the ", size, " ranks of ", prefix, " failed: ", e.what());
    }
    // Generous: a slow step on another rank is not a failure (the coordinator's watchdog
    // catches ranks that are gone or hung).
    ctx->setTimeout(std::chrono::hours(1));
    ctx_ = ctx;
  }
  int rank() const override { return ctx_->rank; }
  int world_size() const override { return ctx_->size; }
  std::string name() const override { return "gloo (tcp)"; }

  void all_reduce_sum(Tensor& t) override {
    gloo::AllreduceOptions o(ctx_);
    set_sum(o, t, "all_reduce");
    run([&] { gloo::allreduce(o); }, "all_reduce");
  }
  void reduce_sum(Tensor& t, int root) override {
    gloo::ReduceOptions o(ctx_);
    set_sum(o, t, "reduce");
    o.setRoot(root);
    run([&] { gloo::reduce(o); }, "reduce");
  }
  void broadcast_from(const Tensor& src, Tensor& dst, int root) override {
    if (ctx_->rank == root && src.raw() != dst.raw()) dst.copy_from(src);
    broadcast(dst, root);
  }
  void reduce_sum_to(const Tensor& src, Tensor& dst, int root) override {
    // (Gloo reduces in place: a scratch copy keeps src as it was)
    Tensor t = src.clone();
    reduce_sum(t, root);
    if (ctx_->rank == root) dst.copy_from(t);
  }
  void broadcast(Tensor& t, int root) override {
    if (t.device() != Device::CPU) fail("gloo broadcast: needs a CPU tensor, got ", t.describe());
    gloo::BroadcastOptions o(ctx_);
    char* p = static_cast<char*>(t.raw());
    if (ctx_->rank == root) o.setInput(p, t.nbytes());  // (Gloo: only the root names an input)
    o.setOutput(p, t.nbytes());
    o.setRoot(root);
    run([&] { gloo::broadcast(o); }, "broadcast");
  }

 private:
  template <class F>
  void run(F&& f, const char* what) {
    // profiler.range_times: each collective's time (Gloo's are done when the call returns)
    const int span = range_timer::recording() ? range_timer::begin(("gloo " + std::string(what)).c_str()) : -1;
    try {
      f();
      range_timer::end(span);
    } catch (const std::exception& e) {
      // Usually a peer died (its connection reset). The coordinator names it and ends this
      // process within a heartbeat or two; give it that chance before the less telling error.
      std::this_thread::sleep_for(std::chrono::seconds(5));
      fail("gloo ", what, " failed on rank ", ctx_->rank, ": ", e.what());
    }
  }
  std::shared_ptr<gloo::Context> ctx_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(Coordinator& coord, bool single_host) {
  return std::make_unique<GlooCommunicator>(coord, single_host, "gloo", coord.rank(), coord.world_size());
}

std::unique_ptr<Communicator> make_gloo_group_communicator(Coordinator& coord, bool single_host, int first_rank,
                                                           int size) {
  const int rank = coord.rank() - first_rank;
  if (rank < 0 || rank >= size) fail("gloo: rank ", coord.rank(), " is not in the group of ranks ", first_rank, "..", first_rank + size - 1);
  return std::make_unique<GlooCommunicator>(coord, single_host, "gloo-group" + std::to_string(first_rank), rank, size);
}

}  // namespace biofm

#else

namespace biofm {

std::unique_ptr<Communicator> make_gloo_group_communicator(Coordinator& coord, bool single_host, int, int) {
  return make_gloo_communicator(coord, single_host);
}

std::unique_ptr<Communicator> make_gloo_communicator(Coordinator&, bool) {
  fail("multi-process training on CPUs needs Gloo, and this biofm was built without it "
       "(install libgloo-dev and reconfigure, or train on GPUs)");
}

}  // namespace biofm

#endif
