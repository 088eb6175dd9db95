// biofm launch: start this node's processes of a multi-process run (dist/launcher.h).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "biofm/cli/commands.h"
#include "biofm/dist/launcher.h"

namespace biofm {

int cmd_launch(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::puts(
        "usage: biofm launch --nproc-per-node N [--nnodes M --node-rank R --master ADDR:PORT] [--grace-seconds 30]\n"
        "                    COMMAND [ARGS...]\n"
        "Starts N processes of `biofm COMMAND ARGS...` on this node with RANK, WORLD_SIZE (M*N), LOCAL_RANK,\n"
        "LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as torchrun does; default master 127.0.0.1:29500).\n"
        "Run it once per node with its --node-rank. When a process fails, the others are stopped and the\n"
        "launcher exits with the failed rank's code; SIGTERM / SIGINT are passed on to every process.");
    return args.empty() ? 2 : 0;
  }
  std::vector<std::string> command;
  const LaunchOptions o = parse_launch_args(args, command);
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  return launch_local(o, exe, command);
}

}  // namespace biofm
