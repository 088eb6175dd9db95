#include "biofm/cli/config_flags.h"

#include "biofm/cli/flags.h"
#include "biofm/io/config.h"
#include "biofm/train/config.h"

namespace biofm {

void check_config_overrides(const std::vector<std::string>& overrides) {
  if (overrides.empty()) return;
  // Keys a run cannot go without, emptied on the command line ("dataset.path=" from an unset
  // shell variable): a missing value, so a usage error like a missing flag.
  for (const std::string& o : overrides)
    for (const char* key : {"dataset.path", "output_dir"})
      if (o == std::string(key) + "=")
        throw UsageError(std::string("the override '") + o + "' leaves " + key + " empty: give it a value");
  try {
    // The built-in defaults with the overrides on top: each override is checked as loading
    // checks it (config::load_string validates keys, types, enum values and ranges).
    (void)config::load_string(train_config_schema(), "{}", overrides, "", "the config overrides");
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  // (what the recipes' spellings were read as is printed where the run's config is loaded:
  // load_train_config_searched)
}

std::string config_keys_help() {
  return "config keys (key=value overrides, after the flags; the defaults shown are the built-in ones,\n"
         "which NAME.yaml may change; --print-config shows the resolved values):\n" +
         train_config_schema().describe();
}

}  // namespace biofm
