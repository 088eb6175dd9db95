// Inside the coordinator: what rank 0 (coordinator_server.cpp), the other ranks
// (coordinator_client.cpp) and a single process (coordinator.cpp) have in common.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "biofm/dist/coordinator.h"
#include "biofm/dist/coordinator_protocol.h"

namespace biofm::coord {

using net::Clock;

// "0.4" below 10 s, "30" above: failure messages name durations the way a person would.
std::string seconds_text(Clock::duration d);

// The replies this rank's calls wait for. The background thread delivers them (on rank 0,
// its server thread); a failure wakes every waiter, whose call then throws the message.
class Mailbox {
 public:
  uint64_t new_request_id();

  // VALUE, GATHERED and BYE_ACK frames; false for any other type.
  bool deliver(const Frame& f);
  void finished(std::string problem);  // the goodbye is complete; problem: why it was not clean
  void fail(const std::string& message);

  std::optional<std::string> failure() const;
  // Throws at the deadline (naming the key and the rank) or on a failure.
  std::string wait_value(uint64_t id, const std::string& key, int rank, Clock::time_point deadline);
  // Every rank's bytes of the next all-gather; throws on a failure.
  std::vector<std::string> wait_gathered();
  // True once finished (problem set), false at the deadline or on a failure.
  bool wait_finished(Clock::time_point deadline, std::string& problem);

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::string> values_;
  std::deque<std::vector<std::string>> gathered_;
  std::optional<std::string> finish_problem_;
  std::optional<std::string> failure_;
};

// The step this rank is in and since when (set by the training thread, read by the
// heartbeat sender or rank 0's watchdog).
class StepClock {
 public:
  // phase: 0 training, 1 validation/checkpoint/export (Coordinator::Phase).
  void set(int64_t step, int phase = 0);
  struct Reading {
    int64_t step = -1;  // -1 before the first set
    Clock::duration in_step{};
    int phase = 0;
  };
  Reading now() const;
  // The longest of the last 20 completed training phases (zero before the first ended).
  Clock::duration longest_recent() const;

 private:
  mutable std::mutex m_;
  int64_t step_ = -1;
  int phase_ = 0;
  Clock::time_point since_{};
  std::deque<Clock::duration> recent_;
};

}  // namespace biofm::coord

namespace biofm {

// One implementation per role: a single process, rank 0, or one of the others.
struct Coordinator::Impl {
  Impl(const DistEnv& e, const CoordinatorOptions& o, FailureHandler handler)
      : env(e), opt(o), on_failure_(std::move(handler)) {}
  virtual ~Impl() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // The goodbye; then shutdown(). Throws only where rank 0 gave up waiting for some rank.
  virtual void finish() = 0;
  // Stops the background thread and closes the connections, with no goodbye; idempotent.
  virtual void shutdown() noexcept = 0;

  // Once per process: the handler first (the default ends the process there), then every
  // call waiting for a reply throws the message.
  void report_failure(const std::string& message);
  bool failed() const { return failure_reported_; }  // true from the handler's call on

  const DistEnv env;
  const CoordinatorOptions opt;
  coord::Mailbox mailbox;
  coord::StepClock step;
  std::atomic<bool> heartbeats_paused{false};
  bool finished = false;  // finish() has run (the caller's thread only)

 private:
  FailureHandler on_failure_;
  std::atomic<bool> failure_reported_{false};
};

}  // namespace biofm

namespace biofm::coord {

// Both connect (rank 0 waits for every rank; the others reach rank 0) before returning, and
// throw when the rendezvous fails.
std::unique_ptr<Coordinator::Impl> make_rank0(const DistEnv& env, const CoordinatorOptions& o,
                                              Coordinator::FailureHandler on_failure);
std::unique_ptr<Coordinator::Impl> make_client(const DistEnv& env, const CoordinatorOptions& o,
                                               Coordinator::FailureHandler on_failure);

}  // namespace biofm::coord
