// `biofm launch`: starts this node's processes of a multi-process run, as torchrun does —
// one per GPU, each with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set — and supervises them: when one fails, the others are stopped (SIGTERM,
// then SIGKILL after a grace period) and the launcher exits with the failed rank's code,
// naming it. SIGTERM / SIGINT to the launcher are passed on to every process; when they all then
// end cleanly (train: checkpoint and exit 0), so does the launcher.
#pragma once
#include <string>
#include <vector>

namespace biofm {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int grace_seconds = 30;  // after one process failed, how long the others get to stop
};

// (`biofm launch`'s flags are parsed in cli/cmd_launch.cpp, parse_launch_flags)

// Runs `exe command...` nproc_per_node times with the rank variables set; returns the exit
// code (0 when every process succeeded).
int launch_local(const LaunchOptions& o, const std::string& exe, const std::vector<std::string>& command);

}  // namespace biofm
