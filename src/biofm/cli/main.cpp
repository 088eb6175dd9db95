// biofm: train and run biological sequence foundation models.
//
// Exit codes (README.md, "Exit codes"): 0 success; 1 runtime error (a missing or malformed
// input, a config file's mistakes, training diverged, ...); 2 usage error: anything wrong with
// the command line itself (unknown command, flag or config key, a bad flag or override value, a
// missing argument; cli/flags.h says which errors are which).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/error.h"

namespace {

// The command list comes from each command's own spec (name and one-line summary).
std::string usage() {
  std::string s =
      "usage: biofm <command> [options]\n"
      "       biofm --version | --help | help <command>\n\ncommands:\n";
  for (const biofm::Command& c : biofm::kCommands) {
    std::string left = "  " + c.spec->name;
    left.resize(std::max<size_t>(left.size() + 2, 14), ' ');
    s += left + c.spec->summary + "\n";
  }
  s += "\nRun 'biofm <command> --help' for a command's usage and options.\n"
       "Exit codes: 0 success, 1 runtime error, 2 usage error (a bad command line).\n";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(usage().c_str(), stderr);
    return 2;
  }
  std::string cmd = argv[1];
  const bool help = cmd == "--help" || cmd == "-h" || cmd == "help", version = cmd == "--version" || cmd == "version";
  if ((help && argc > 3) || (version && argc > 2)) {
    std::fprintf(stderr, "biofm: unexpected argument '%s' after '%s'\n\n%s", argv[help ? 3 : 2], cmd.c_str(),
                 usage().c_str());
    return 2;
  }
  if (version) {
    std::printf("biofm %s\n", BIOFM_VERSION);
    return 0;
  }
  if (help && argc == 2) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  char help_flag[] = "--help";
  char* help_argv[] = {argv[0], argv[argc - 1], help_flag, nullptr};
  if (help) {  // `biofm help CMD` is `biofm CMD --help`
    cmd = argv[2];
    argc = 3;
    argv = help_argv;
  }
  const biofm::Command* found = nullptr;
  for (const biofm::Command& c : biofm::kCommands)
    if (cmd == c.spec->name) found = &c;
  if (!found) {
    std::fprintf(stderr, "biofm: unknown command '%s'\n\n%s", cmd.c_str(), usage().c_str());
    return 2;
  }
  try {
    const int rc = found->run(argc, argv);
    // GPU library state and cached blocks go back before exit, so that a leak check
    // (compute-sanitizer --leak-check full) reports only memory that something still holds.
    biofm::device_release_at_exit();
    return rc;
  } catch (const biofm::UsageError& e) {
    // Every usage error names the command: "biofm CMD: what is wrong".
    const std::string prefix = "biofm " + cmd + ": ";
    std::string msg = e.what();
    if (msg.rfind(prefix, 0) != 0) msg = prefix + msg;
    std::fprintf(stderr, "%s\nRun 'biofm %s --help' for usage.\n", msg.c_str(), cmd.c_str());
    return 2;
  } catch (const biofm::Error& e) {
    std::string msg = e.what();
    if (const std::string prefix = "biofm " + cmd + ": "; msg.rfind(prefix, 0) == 0) msg.erase(0, prefix.size());
    std::fprintf(stderr, "biofm %s: error: %s\n", cmd.c_str(), msg.c_str());
    return 1;
  } catch (const std::bad_alloc&) {  // an input too large for this machine is not a bug
    std::fprintf(stderr, "biofm %s: error: out of memory\n", cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biofm %s: internal error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
