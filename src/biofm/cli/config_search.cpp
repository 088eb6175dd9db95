#include "biofm/cli/config_search.h"

#include <unistd.h>

#include <filesystem>

#include "biofm/core/error.h"

namespace fs = std::filesystem;

namespace biofm {

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::vector<std::string> config_search_path(const std::string& user_dir) {
  std::vector<std::string> candidates, out;
  if (!user_dir.empty()) {
    if (!fs::is_directory(user_dir)) fail("--config-dir '", user_dir, "' is not a directory");
    candidates.push_back(user_dir);
  }
  if (const std::string exe = executable_dir(); !exe.empty())
    candidates.push_back((fs::path(exe) / ".." / "share" / "biofm" / "configs").lexically_normal().string());
#ifdef BIOFM_SOURCE_CONFIG_DIR
  candidates.push_back(BIOFM_SOURCE_CONFIG_DIR);
#endif
  candidates.push_back("configs");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!fs::is_directory(c, ec)) continue;
    const fs::path canon = fs::weakly_canonical(c, ec);
    bool seen = false;
    for (const auto& o : out) seen = seen || fs::weakly_canonical(o, ec) == canon;
    if (!seen) out.push_back(c);
  }
  if (out.empty()) fail("no config directory found (looked for --config-dir, <exe_dir>/../share/biofm/configs, ./configs)");
  return out;
}

namespace {

// The io layer composes configs from one directory: with several on the path, an overlay
// directory of links (first directory wins per file name) stands for the union.
class Overlay {
 public:
  explicit Overlay(const std::vector<std::string>& dirs) {
    std::string tmpl = (fs::temp_directory_path() / "biofm_configs_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) fail("cannot create a temporary directory in ", fs::temp_directory_path().string());
    path_ = tmpl;
    for (const auto& d : dirs)
      for (const auto& e : fs::directory_iterator(d)) {
        const fs::path link = fs::path(path_) / e.path().filename();
        if (e.path().extension() != ".yaml" || fs::exists(fs::symlink_status(link))) continue;
        fs::create_symlink(fs::absolute(e.path()), link);
      }
  }
  ~Overlay() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TrainConfig load_train_config_searched(const std::vector<std::string>& dirs, const std::string& name,
                                       const std::vector<std::string>& overrides) {
  if (dirs.size() == 1) return load_train_config(dirs[0], name, overrides);
  Overlay overlay(dirs);
  try {
    return load_train_config(overlay.path(), name, overrides);
  } catch (const Error& e) {
    // Name the search path rather than the temporary overlay in the message.
    std::string msg = e.what(), where;
    for (const auto& d : dirs) where += (where.empty() ? "" : ":") + d;
    for (size_t p; (p = msg.find(overlay.path())) != std::string::npos;)
      msg.replace(p, overlay.path().size(), "[" + where + "]");
    throw Error(msg);
  }
}

}  // namespace biofm
