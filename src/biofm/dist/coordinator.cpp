#include "biofm/dist/coordinator.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>

#include "biofm/core/error.h"
#include "biofm/dist/coordinator_impl.h"

namespace biofm {

namespace {

using coord::Clock;

// The main thread may be blocked in a collective that never completes: end the process here,
// with a line in the format of every error (cli/main.cpp): "biofm COMMAND: error: ...".
void exit_on_failure(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "biofm%s%s: error: %s\n", command.empty() ? "" : " ", command.c_str(), message.c_str());
  std::fflush(stderr);
  ::_exit(1);
}

// A single process: no network, no threads; the store is a map.
class SingleProcess final : public Coordinator::Impl {
 public:
  using Impl::Impl;

  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard lock(m_);
      store_[key] = value;
    }
    cv_.notify_all();
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(m_);
    // Another thread of this process may still set it.
    if (!cv_.wait_for(lock, timeout, [&] { return store_.count(key) > 0; }))
      fail("coordinator: waited ", coord::seconds_text(timeout), " s for key '", key, "', which was never set");
    return store_.at(key);
  }

  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
  void finish() override {}
  void shutdown() noexcept override {}

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::map<std::string, std::string> store_;
};

}  // namespace

Coordinator::Coordinator(const DistEnv& env, CoordinatorOptions o, FailureHandler on_failure) {
  if (!on_failure) on_failure = [command = o.command](const std::string& m) { exit_on_failure(command, m); };
  if (!env.distributed())
    impl_ = std::make_unique<SingleProcess>(env, o, std::move(on_failure));
  else if (env.rank == 0)
    impl_ = coord::make_rank0(env, o, std::move(on_failure));
  else
    impl_ = coord::make_client(env, o, std::move(on_failure));
}

Coordinator::~Coordinator() {
  // While an exception unwinds the stack this rank is failing: no goodbye, so that the others
  // learn that it went away instead of waiting for it in a collective.
  if (!impl_->finished && std::uncaught_exceptions() == 0) {
    try {
      finish();
    } catch (...) {  // a destructor must not throw; rank 0 named the missing ranks to them
    }
  }
  impl_->shutdown();
}

int Coordinator::rank() const { return impl_->env.rank; }
int Coordinator::world_size() const { return impl_->env.world_size; }

namespace {
void check_open(const Coordinator::Impl& impl, const char* call) {
  if (impl.finished) fail("coordinator: ", call, "() after finish()");
}
}  // namespace

void Coordinator::set(const std::string& key, const std::string& value) {
  check_open(*impl_, "set");
  impl_->set(key, value);
}

std::string Coordinator::get(const std::string& key, std::chrono::milliseconds timeout) {
  check_open(*impl_, "get");
  return impl_->get(key, timeout);
}

std::vector<std::string> Coordinator::all_gather(const std::string& mine) {
  check_open(*impl_, "all_gather");
  return impl_->all_gather(mine);
}

bool Coordinator::any(bool mine) {
  for (const auto& vote : all_gather(mine ? "1" : "0"))
    if (vote == "1") return true;
  return false;
}

std::vector<double> Coordinator::sum(const std::vector<double>& mine) {
  std::string bytes(mine.size() * sizeof(double), '\0');
  if (!mine.empty()) std::memcpy(bytes.data(), mine.data(), bytes.size());  // data() may be null
  std::vector<double> total(mine.size(), 0.0);
  const auto all = all_gather(bytes);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != bytes.size())
      fail("coordinator: sum over ", mine.size(), " values, but rank ", r, " passed ", all[r].size() / sizeof(double));
    for (size_t i = 0; i < mine.size(); ++i) {
      double v;
      std::memcpy(&v, all[r].data() + i * sizeof(double), sizeof v);
      total[i] += v;
    }
  }
  return total;
}

void Coordinator::set_step(int64_t step, Phase phase) { impl_->step.set(step, int(phase)); }

void Coordinator::finish() {
  if (impl_->finished) return;
  impl_->finished = true;
  impl_->finish();
}

void Coordinator::pause_heartbeats_for_test() { impl_->heartbeats_paused = true; }

}  // namespace biofm
