// Where `biofm train` and `biofm bench` find configs by name. The search path, first match
// wins: the --config-dir DIR the user gave, <exe_dir>/../share/biofm/configs (an installed
// biofm), the source tree the binary was built from, ./configs. A config's `defaults:` are
// looked up along the same path, so a user's config in DIR can say `defaults: [esm2_base]`.
#pragma once
#include <string>
#include <vector>

#include "biofm/train/config.h"

namespace biofm {

// The existing directories of the search path, in order (user_dir first when not empty; a
// user_dir that does not exist is an error).
std::vector<std::string> config_search_path(const std::string& user_dir);

// The directory holding this executable (from /proc/self/exe).
std::string executable_dir();

// load_train_config through the search path.
TrainConfig load_train_config_searched(const std::vector<std::string>& dirs, const std::string& name,
                                       const std::vector<std::string>& overrides);

}  // namespace biofm
