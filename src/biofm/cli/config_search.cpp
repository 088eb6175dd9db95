#include "biofm/cli/config_search.h"

#include <cctype>
#include <cstdio>

#include <glob.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "biofm/core/error.h"
#include "biofm/data/input_files.h"
#include "biofm/io/atomic_file.h"
#include "biofm/dist/launch_env.h"

namespace fs = std::filesystem;

namespace biofm {

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

namespace {

// The candidates that are directories, each directory once, in order.
std::vector<std::string> existing_dirs(const std::vector<std::string>& candidates) {
  std::vector<std::string> out;
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!fs::is_directory(c, ec)) continue;
    const fs::path canon = fs::weakly_canonical(c, ec);
    bool seen = false;
    for (const auto& o : out) seen = seen || fs::weakly_canonical(o, ec) == canon;
    if (!seen) out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<std::string> config_search_path(const std::string& user_dir) {
  std::vector<std::string> candidates;
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
  const std::vector<std::string> out = existing_dirs(candidates);
  if (out.empty()) fail("no config directory found (looked for --config-dir, <exe_dir>/../share/biofm/configs, ./configs)");
  return out;
}

std::vector<std::string> shipped_roots() {
  std::vector<std::string> candidates;
  if (const std::string exe = executable_dir(); !exe.empty())
    candidates.push_back((fs::path(exe) / ".." / "share" / "biofm").lexically_normal().string());
#ifdef BIOFM_SOURCE_CONFIG_DIR
  candidates.push_back(fs::path(BIOFM_SOURCE_CONFIG_DIR).parent_path().string());
#endif
  return existing_dirs(candidates);
}

namespace {

// Something is at `p`: it exists, or it is a glob pattern with a match (data/input_files.h).
bool present(const fs::path& p) {
  std::error_code ec;
  if (fs::exists(p, ec)) return true;
  const std::string s = p.string();
  if (s.find_first_of("*?[") == std::string::npos) return false;
  glob_t g{};
  const int rc = glob(s.c_str(), 0, nullptr, &g);
  const bool matched = rc == 0 && g.gl_pathc > 0;
  globfree(&g);
  return matched;
}

}  // namespace

std::string resolve_input_path(const std::string& key, const std::string& value, const std::vector<std::string>& roots,
                               const std::string& cwd) {
  std::vector<std::string> entries = split_input_list(value);
  bool changed = false;
  for (auto& e : entries) {
    const fs::path rel(e);
    if (rel.is_absolute() || present(cwd.empty() ? rel : fs::path(cwd) / rel)) continue;
    std::error_code ec;
    const fs::path here = cwd.empty() ? fs::current_path(ec) : fs::path(cwd);
    std::string tried = (here / rel).lexically_normal().string() + " (from the current directory)";
    bool found = false;
    for (const auto& r : roots) {
      const fs::path at = (fs::absolute(r, ec) / rel).lexically_normal();
      if (present(at)) {
        e = at.string();
        found = changed = true;
        break;
      }
      tried += ", " + at.string() + " (biofm's shipped tree)";
    }
    if (!found)
      fail(key, ": cannot find '", e, "': looked for ", tried,
           roots.empty() ? " (and no biofm shipped tree was found: <exe_dir>/../share/biofm)" : "");
  }
  if (!changed) return value;
  std::string out;
  for (const auto& e : entries) out += (out.empty() ? "" : ",") + e;
  return out;
}

void resolve_input_paths(TrainConfig& cfg, const std::vector<std::string>& roots) {
  cfg.dataset.path = resolve_input_path("dataset.path", cfg.dataset.path, roots);
  cfg.dataset.val_path = resolve_input_path("dataset.val_path", cfg.dataset.val_path, roots);
  cfg.model.init_from = resolve_input_path("model.init_from", cfg.model.init_from, roots);
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

namespace {

// `text` with the temporary overlay's paths named as the files they lead to (or as the search
// path, for a file that is in none of its directories).
std::string without_overlay(std::string msg, const Overlay& overlay, const std::vector<std::string>& dirs) {
  std::string where;
  for (const auto& d : dirs) where += (where.empty() ? "" : ":") + d;
  // (a config missing from every directory: io's "not found in 'DIR' (no DIR/x.yaml)")
  const std::string missing = "not found in '" + overlay.path() + "' (no " + overlay.path() + "/";
  if (const size_t p = msg.find(missing); p != std::string::npos) {
    const size_t file = p + missing.size(), close = msg.find(')', file);
    if (close != std::string::npos) {
      std::string listed;
      for (const auto& d : dirs) listed += (listed.empty() ? "" : ", ") + d;
      msg.replace(p, close + 1 - p,
                  "not found on the config search path (no " + msg.substr(file, close - file) + " in " + listed + ")");
    }
  }
  const auto in_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; };
  for (size_t p; (p = msg.find(overlay.path())) != std::string::npos;) {
    size_t end = p + overlay.path().size();
    std::string replacement = "[" + where + "]";
    if (end < msg.size() && msg[end] == '/') {
      size_t stop = end + 1;
      while (stop < msg.size() && in_name(msg[stop])) ++stop;
      const fs::path link = fs::path(overlay.path()) / msg.substr(end + 1, stop - end - 1);
      std::error_code ec;
      if (stop > end + 1 && fs::is_symlink(link, ec)) {
        replacement = fs::read_symlink(link, ec).string();
        end = stop;
      }
    }
    msg.replace(p, end - p, replacement);
  }
  return msg;
}

TrainConfig load_composed(const std::vector<std::string>& dirs, const std::string& name,
                          const std::vector<std::string>& overrides, std::vector<std::string>* notes,
                          std::set<std::string>* overridden) {
  if (dirs.size() == 1) return load_train_config(dirs[0], name, overrides, notes, overridden);
  Overlay overlay(dirs);
  try {
    TrainConfig cfg = load_train_config(overlay.path(), name, overrides, notes, overridden);
    if (notes)
      for (std::string& n : *notes) n = without_overlay(n, overlay, dirs);
    return cfg;
  } catch (const Error& e) {
    throw Error(without_overlay(e.what(), overlay, dirs));
  }
}

}  // namespace

std::vector<std::string> config_files_named(const std::vector<std::string>& dirs, const std::string& name) {
  const bool has_ext = fs::path(name).extension() == ".yaml" || fs::path(name).extension() == ".yml";
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    const fs::path p = fs::path(d) / (has_ext ? name : name + ".yaml");
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) out.push_back(p.string());
  }
  return out;
}

std::string shadowed_config_note(const std::vector<std::string>& dirs, const std::string& name) {
  const std::vector<std::string> files = config_files_named(dirs, name);
  if (files.size() < 2) return "";
  // (copies of the loaded file, such as an installed biofm's and its source tree's, shadow nothing)
  const std::string loaded = read_file(files[0]);
  std::vector<std::string> others;
  for (size_t i = 1; i < files.size(); ++i)
    if (read_file(files[i]) != loaded) others.push_back(files[i]);
  if (others.empty()) return "";
  std::string listed;
  for (const auto& o : others) listed += (listed.empty() ? "" : ", ") + o;
  return "config '" + name + "' is " + files[0] + ", the first on the config search path; " + listed +
         (others.size() > 1 ? " are" : " is") + " not used (--config-dir DIR puts DIR first)";
}

std::string config_provenance(const std::vector<std::string>& dirs, const std::string& name,
                              const std::vector<std::string>& overrides) {
  const std::vector<std::string> files = config_files_named(dirs, name);
  std::string ov;
  for (const auto& o : overrides) ov += " " + o;
  return "loaded from: " + (files.empty() ? name : files[0]) + "\noverrides:" + (ov.empty() ? " (none)" : ov);
}

TrainConfig load_train_config_searched(const std::vector<std::string>& dirs, const std::string& name,
                                       const std::vector<std::string>& overrides) {
  std::vector<std::string> notes;
  std::set<std::string> overridden;
  TrainConfig cfg = load_composed(dirs, name, overrides, &notes, &overridden);
  if (std::string note = shadowed_config_note(dirs, name); !note.empty()) notes.insert(notes.begin(), note);
  resolve_input_paths(cfg, shipped_roots());
  if (std::string note = adopt_init_from_architecture(cfg, overridden); !note.empty()) notes.push_back(note);
  // What the recipes' spellings (in the files and the overrides) were read as, and other notes
  // of loading: once per run (rank 0 or the only process).
  int rank = 0;
  try {
    rank = detect_launched_ranks().rank;
  } catch (const Error&) {  // (reported where the run reads the launcher's variables)
  }
  if (rank == 0)
    for (const std::string& n : notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  return cfg;
}

}  // namespace biofm
