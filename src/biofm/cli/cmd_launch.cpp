// biofm launch: start this node's processes of a multi-process run (dist/launcher.h).
#include <cstdio>
#include <filesystem>
#include <vector>

#include "biofm/cli/commands.h"
#include "biofm/cli/launch_flags.h"

namespace biofm {

const CommandSpec kLaunchSpec{
    .name = "launch",
    .synopsis = "--nproc-per-node N [--nnodes M --node-rank R --master ADDR:PORT] [--grace-seconds 30] COMMAND [ARGS...]",
    .summary = "start this node's processes of a multi-process run (torchrun's variables)",
    .flags = {{"--nproc-per-node", "N", "processes on this node, one per GPU (default 1)"},
              {"--nnodes", "M", "nodes of the run (default 1)"},
              {"--node-rank", "R", "this node's rank, 0 .. M-1 (default 0)"},
              {"--master", "ADDR:PORT", "where rank 0 listens for the rendezvous (default 127.0.0.1:29500)"},
              {"--grace-seconds", "S", "after a process failed, how long the others get to stop (default 30)"},
              // torchrun's spellings, listed in --help so that a torchrun command line is seen to run
              {"--nproc_per_node", "N", "torchrun's spelling of --nproc-per-node"},
              {"--node_rank", "R", "torchrun's spelling of --node-rank"},
              {"--master_addr", "ADDR", "torchrun's: rank 0's address (with --master_port; not with --master)"},
              {"--master-addr", "ADDR", "as --master_addr"},
              {"--master_port", "PORT", "torchrun's: rank 0's port (with --master_addr; not with --master)"},
              {"--master-port", "PORT", "as --master_port"},
              {"--standalone", "", "torchrun's: one node, rendezvous on this host (the defaults; not with --nnodes > 1)"}},
    .flags_end_at_positional = true,
    .details =
        "Starts N processes of `biofm COMMAND ARGS...` on this node with RANK, WORLD_SIZE (M*N), LOCAL_RANK,\n"
        "LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as torchrun does). Run it once per node with its\n"
        "--node-rank. When a process fails, the others are stopped and the launcher exits with the failed\n"
        "rank's code; SIGTERM / SIGINT are passed on to every process. Options end at the command (or at --).",
};

LaunchOptions parse_launch_flags(int argc, char** argv, std::vector<std::string>& command, int first) {
  const Flags f = parse_flags(kLaunchSpec, argc, argv, first);
  command.clear();
  if (f.help()) return {};  // (the caller prints the help: no command)
  const auto either = [&](const char* a, const char* b) { return f.has(b) ? b : a; };
  LaunchOptions o;
  o.nproc_per_node = int(f.get_int(either("--nproc-per-node", "--nproc_per_node"), 1, 1, 4096));
  o.nnodes = int(f.get_int("--nnodes", 1, 1, 65535));
  o.node_rank = int(f.get_int(either("--node-rank", "--node_rank"), 0, 0, 65534));
  o.grace_seconds = int(f.get_int("--grace-seconds", 30, 0, 86400));
  const auto port_of = [](const std::string& flag, const std::string& port) {
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      usage_fail("biofm launch: ", flag, "'s port must be 1..65535, got '", port, "'");
    return std::stoi(port);
  };
  const char* addr_flag = either("--master_addr", "--master-addr");
  const char* port_flag = either("--master_port", "--master-port");
  if (f.has("--master")) {
    if (f.has(addr_flag) || f.has(port_flag))
      usage_fail("biofm launch: give --master ADDR:PORT or torchrun's --master_addr / --master_port, not both");
    const std::string m = f.get("--master");
    const size_t colon = m.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == m.size())
      usage_fail("biofm launch: --master expects ADDR:PORT, got '", m, "'");
    o.master_addr = m.substr(0, colon);
    o.master_port = port_of("--master", m.substr(colon + 1));
  }
  if (f.has(addr_flag)) o.master_addr = f.get(addr_flag);
  if (f.has(port_flag)) o.master_port = port_of(port_flag, f.get(port_flag));
  if (f.has("--standalone") && o.nnodes > 1) usage_fail("biofm launch: --standalone is one node, but --nnodes is ", o.nnodes);
  if (o.node_rank >= o.nnodes) usage_fail("biofm launch: --node-rank ", o.node_rank, " must be below --nnodes ", o.nnodes);
  command = f.positional();
  if (command.empty())
    usage_fail("biofm launch: no command given (e.g. biofm launch --nproc-per-node 2 train --config-name NAME)");
  return o;
}

int cmd_launch(int argc, char** argv) {
  std::vector<std::string> command;
  const LaunchOptions o = parse_launch_flags(argc, argv, command);
  if (command.empty()) {  // --help
    print_help(kLaunchSpec);
    return 0;
  }
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  return launch_local(o, exe, command);
}

}  // namespace biofm
