// `biofm launch`'s flags (the command it starts and that command's flags follow them).
#pragma once
#include <string>
#include <vector>

#include "biofm/cli/flags.h"
#include "biofm/dist/launcher.h"

namespace biofm {

extern const CommandSpec kLaunchSpec;

// argv[first..argc): the launch options; the command and its arguments go to `command`.
// Usage errors (unknown flag, no command, --node-rank >= --nnodes, a bad --master) throw
// UsageError; numbers out of range throw biofm::Error naming the flag. With --help, returns
// with `command` empty.
LaunchOptions parse_launch_flags(int argc, char** argv, std::vector<std::string>& command, int first = 2);

}  // namespace biofm
