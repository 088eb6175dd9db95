#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "biofm/cli/args.h"
#include "biofm/cli/commands.h"
#include "biofm/train/config.h"
#include "biofm/train/trainer.h"

namespace biofm {

namespace {

// configs/ next to the working directory, else the source tree's (baked in at build time).
std::string default_config_dir() {
  if (std::filesystem::is_directory("configs")) return "configs";
#ifdef BIOFM_SOURCE_CONFIG_DIR
  return BIOFM_SOURCE_CONFIG_DIR;
#else
  return "configs";
#endif
}

}  // namespace

int cmd_train(int argc, char** argv) {
  Args args(argc, argv, 2, {"--config-name", "--config-dir"}, {"--help", "--print-config"}, "train");
  if (args.has("--help")) {
    std::puts(
        "usage: biofm train --config-name NAME [--config-dir DIR] [--print-config] [key.sub=value ...]\n"
        "Loads DIR/NAME.yaml (default DIR: ./configs), applies the overrides, validates every key,\n"
        "then trains. --print-config prints the resolved config and exits. See README.md for keys.");
    return 0;
  }
  TrainConfig cfg = load_train_config(args.get("--config-dir", default_config_dir()),
                                      args.require("--config-name"), args.positional());
  if (args.has("--print-config")) {
    std::fputs(to_yaml(cfg).c_str(), stdout);
    return 0;
  }
  run_training(cfg);
  return 0;
}

}  // namespace biofm
