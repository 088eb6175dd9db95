// The control plane of a multi-process run: one TCP connection from every rank to rank 0 at
// MASTER_ADDR:MASTER_PORT, beside the data plane (NCCL on GPUs, Gloo on CPUs). It carries
// small things only:
//   - the rendezvous: every rank connects (bounded by a timeout; the ranks that never arrived
//     are named);
//   - a key-value store (the NCCL unique id; Gloo's rendezvous);
//   - small all-gathers of host bytes (the per-step stop vote, evaluation sums, every rank's
//     throughput), matched call by call;
//   - liveness: a rank whose process ends without saying goodbye (its connection closes), that
//     stops sending heartbeats, or that sits in one training step longer than the step timeout
//     makes every rank fail within seconds with a message naming it.
// Rank 0 serves (a background thread polls all connections); each other rank keeps one
// background thread that reads replies and failure notices and sends its heartbeats.
// Wire format and internals: coordinator_protocol.h, coordinator_impl.h.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "biofm/dist/launch_env.h"

namespace biofm {

struct CoordinatorOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(300)};  // all ranks arrive by then
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(1)};
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(30)};  // silent that long: failed
  // A training step longer than this is hung. Adaptive (step_timeout zero): 5 times the longest of
  // rank 0's last 20 steps, at least min_step_timeout; first_step_timeout until a step has ended.
  std::chrono::milliseconds step_timeout{std::chrono::seconds(0)};
  std::chrono::milliseconds min_step_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds first_step_timeout{std::chrono::seconds(600)};
  // Validation, checkpoint and export (Phase::Io) may take this long.
  std::chrono::milliseconds io_timeout{std::chrono::seconds(1800)};
  // The biofm command this process runs: the default failure handler's line reads
  // "biofm <command>: error: <message>" ("biofm: error: ..." when empty).
  std::string command;
};

class Coordinator {
 public:
  // Called (from a background thread) once, when a peer failed; the message names the rank and
  // why. The default prints "biofm <command>: error: <message>" to stderr and ends the process
  // with _exit(1): the main thread may be blocked in a collective that will never complete. A handler that
  // returns makes the calls waiting here throw the message; it must not destroy the Coordinator.
  using FailureHandler = std::function<void(const std::string& message)>;

  // Connects (rank 0 listens, the others retry until connect_timeout). A single process
  // (world_size 1) needs no network and every call below returns at once.
  explicit Coordinator(const DistEnv& env, CoordinatorOptions o = {}, FailureHandler on_failure = {});
  // Says goodbye if finish() was not called (errors swallowed), closes the connections, joins
  // the threads. While an exception unwinds the stack it says no goodbye: the others then learn
  // that this rank failed instead of waiting for it.
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  int rank() const;
  int world_size() const;

  // Key-value store shared by all ranks. get waits until some rank has set the key; throws
  // at the timeout, naming the key.
  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key, std::chrono::milliseconds timeout = std::chrono::seconds(300));

  // Every rank passes its bytes; every rank gets all ranks' bytes in rank order. The n-th call
  // of each rank is matched with the n-th call of the others; blocks until all have made it.
  // One thread of a rank at a time.
  std::vector<std::string> all_gather(const std::string& mine);
  // Built on all_gather: whether any rank passed true; element-wise sums over ranks.
  bool any(bool mine);
  std::vector<double> sum(const std::vector<double>& mine);

  // The step this rank is in (heartbeats carry it): the step watchdog and the failure messages
  // use it ("rank 1 has been in step 12 for 65 s; ranks 0, 2 last reported step 13"). Phase::Io:
  // the step's validation, checkpoint or export, under io_timeout instead of the step limit;
  // (0, Io) is the setup before step 1 (model build, NCCL init, resume), under io_timeout too.
  enum class Phase { Train = 0, Io = 1 };
  void set_step(int64_t step, Phase phase = Phase::Train);

  // A clean end: waits (bounded by heartbeat_timeout) until every rank has said goodbye, so
  // that no rank reads the others' closing connections as failures. Then no call may follow.
  void finish();

  // Tests only: stop sending heartbeats (as a stopped or frozen process would).
  void pause_heartbeats_for_test();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace biofm
