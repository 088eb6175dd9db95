// Where `biofm train` and `biofm bench` find configs by name. The search path, first match
// wins: the --config-dir DIR the user gave, <exe_dir>/../share/biofm/configs (an installed
// biofm), the source tree the binary was built from, ./configs. A config's `defaults:` are
// looked up along the same path, so a user's config in DIR can say `defaults: [esm2_base]`.
//
// Relative paths in a config. The shipped configs name the bundled samples as
// `data/proteins_sample.fasta`, relative to biofm's shipped tree (the directory holding configs/
// and data/: <prefix>/share/biofm when installed, the source tree when run from a build). The
// rule, for every entry of the input-valued keys (dataset.path, dataset.val_path,
// model.init_from): an absolute path is taken as is; a relative one is taken from the current
// directory when something is there (a file, a directory, or glob matches); else from the
// first shipped tree where it is (the entry becomes that absolute path, and the saved
// config.yaml says so); else loading fails naming the key and every place tried. Outputs
// (output_dir, checkpoint.ckpt_dir) stay relative to the current directory.
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

// The shipped trees that exist, in search order: <exe_dir>/../share/biofm (an installed biofm),
// the source tree the binary was built from (the parent of its configs/).
std::vector<std::string> shipped_roots();

// The rule above for one key's value (a comma-separated list of files, directories or globs;
// "" stays ""). `cwd` "" = the current directory. Entries that needed no change keep the value
// as written.
std::string resolve_input_path(const std::string& key, const std::string& value, const std::vector<std::string>& roots,
                               const std::string& cwd = "");

// resolve_input_path on dataset.path, dataset.val_path and model.init_from.
void resolve_input_paths(TrainConfig& cfg, const std::vector<std::string>& roots);

// The files NAME.yaml on the search path, in its order: the first is the one loaded.
std::vector<std::string> config_files_named(const std::vector<std::string>& dirs, const std::string& name);
// When NAME.yaml is in more than one directory of the search path (a ./configs/NAME.yaml behind
// the shipped one, say): a note naming the file loaded and the ones it shadows; else "".
std::string shadowed_config_note(const std::vector<std::string>& dirs, const std::string& name);
// The header of a run's config.yaml: the file NAME resolved to and the command-line overrides
// (as Hydra's .hydra/overrides.yaml keeps them).
std::string config_provenance(const std::vector<std::string>& dirs, const std::string& name,
                              const std::vector<std::string>& overrides);
// load_train_config through the search path, then resolve_input_paths(cfg, shipped_roots());
// notes shadowed_config_note on stderr (with the recipes' spellings read and other notes of loading).
TrainConfig load_train_config_searched(const std::vector<std::string>& dirs, const std::string& name,
                                       const std::vector<std::string>& overrides);

}  // namespace biofm
