#include <cstdio>
#include <string>

#include "biofm/cli/commands.h"
#include "biofm/cli/config_search.h"
#include "biofm/cli/flags.h"
#include "biofm/train/config.h"
#include "biofm/train/trainer.h"

namespace biofm {

namespace {

const CommandSpec kTrain{
    "train",
    "--config-name NAME [--config-dir DIR] [--print-config] [key.sub=value ...]",
    "Loads NAME.yaml from the config search path, applies the dotted overrides, validates every\n"
    "key, then trains. Search path: --config-dir DIR, <exe_dir>/../share/biofm/configs, the source\n"
    "tree's configs/, ./configs (a config's `defaults:` are found along the same path).\n"
    "See README.md for the keys.",
    {
        {"--config-name", "NAME", "config to load (NAME.yaml)"},
        {"--config-dir", "DIR", "search DIR before the shipped configs"},
        {"--print-config", "", "print the resolved config and exit"},
    }};

}  // namespace

int cmd_train(int argc, char** argv) {
  const Flags f = parse_flags(kTrain, argc, argv);
  if (f.help()) {
    print_help(kTrain);
    return 0;
  }
  const std::string name = f.require("--config-name");
  TrainConfig cfg = load_train_config_searched(config_search_path(f.get("--config-dir")), name, f.positional());
  if (f.has("--print-config")) {
    std::fputs(to_yaml(cfg).c_str(), stdout);
    return 0;
  }
  // (a multi-process run when launched by biofm launch, torchrun, srun or mpirun: the rank
  // variables are read inside)
  run_training(cfg);
  return 0;
}

}  // namespace biofm
