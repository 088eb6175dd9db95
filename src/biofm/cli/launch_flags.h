// `biofm launch`'s flags (the command it starts and that command's flags follow them).
#pragma once
#include <string>
#include <vector>

#include "biofm/cli/flags.h"
#include "biofm/dist/launcher.h"

namespace biofm {

extern const CommandSpec kLaunchSpec;

// argv[first..argc): the launch options; the command and its arguments go to `command`.
// Usage errors (unknown flag, no command, --node-rank >= --nnodes, a bad --master, a number
// that does not parse or lies out of range) throw UsageError. With --help, returns with
// `command` empty.
LaunchOptions parse_launch_flags(int argc, char** argv, std::vector<std::string>& command, int first = 2);

}  // namespace biofm
