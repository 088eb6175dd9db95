#include <cstdio>
#include <string>

#include "biofm/cli/commands.h"
#include "biofm/cli/config_flags.h"
#include "biofm/cli/config_search.h"
#include "biofm/cli/flags.h"
#include "biofm/train/config.h"
#include "biofm/train/trainer.h"

namespace biofm {

const CommandSpec kTrainSpec{
    .name = "train",
    .synopsis = "--config-name NAME [--config-dir DIR] [--print-config] [key.sub=value ...]",
    .summary = "train a model from the config NAME.yaml with key=value overrides",
    .flags =
        {
            {"--config-name", "NAME", "config to load (NAME.yaml)"},
            {"--config-dir", "DIR", "search DIR before the shipped configs"},
            {"--print-config", "", "print the resolved config and exit"},
        },
    .details =
        "Loads NAME.yaml from the config search path, applies the dotted overrides, validates every\n"
        "key, then trains. Search path: --config-dir DIR, <exe_dir>/../share/biofm/configs, the source\n"
        "tree's configs/, ./configs (a config's `defaults:` are found along the same path).\n"
        "Overrides: key=value (also +key=value, ++key=value); ~key or ~section resets to the built-in\n"
        "default listed below. An override with an unknown key or a bad value is a usage error (exit 2);\n"
        "a config file's mistakes and the rules across keys are checked on the composed config (exit 1).",
    .help_tail = config_keys_help,
    .config_schema = train_config_schema,
};

int cmd_train(int argc, char** argv) {
  const Flags f = parse_flags(kTrainSpec, argc, argv);
  if (f.help()) {
    print_help(kTrainSpec);
    return 0;
  }
  const std::string name = f.require("--config-name");
  check_config_overrides(f.positional());
  const std::vector<std::string> dirs = config_search_path(f.get("--config-dir"));
  TrainConfig cfg = load_train_config_searched(dirs, name, f.positional());
  if (f.has("--print-config")) {
    std::fputs(to_yaml(cfg).c_str(), stdout);
    return 0;
  }
  // (a multi-process run when launched by biofm launch, torchrun, srun or mpirun: the rank
  // variables are read inside)
  run_training(cfg, config_provenance(dirs, name, f.positional()));
  return 0;
}

}  // namespace biofm
