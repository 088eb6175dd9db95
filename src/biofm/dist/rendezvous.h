// The rendezvous of a multi-process run: every rank connects to rank 0 at
// MASTER_ADDR:MASTER_PORT over TCP, and rank 0 hands each the same payload (the NCCL unique
// id, or anything else every rank must share) once all have arrived. Bounded by a timeout:
// rank 0 names the ranks that never arrived; the others say that rank 0 did not answer.
#pragma once
#include <chrono>
#include <string>

#include "biofm/dist/launch_env.h"

namespace biofm {

// Rank 0 passes the payload; the others pass anything and get rank 0's. A single process
// returns its own payload at once.
std::string rendezvous(const DistEnv& env, const std::string& payload,
                       std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace biofm
