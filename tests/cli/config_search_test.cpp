// Relative input paths in configs (cli/config_search.h): the current directory first, then
// biofm's shipped trees; a path found nowhere fails naming every place tried.
#include "biofm/cli/config_search.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "biofm/core/error.h"
#include "testing.h"

namespace fs = std::filesystem;
using namespace biofm;

namespace {

std::string fresh(const std::string& name) {
  const std::string d = (fs::path(testing::TempDir()) / ("biofm_cfgsearch_" + name)).lexically_normal().string();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << ">a\nMKV\n";
}

using testkit::error_of;

}  // namespace

TEST(ConfigSearch, RelativePathFromTheCurrentDirectoryFirst) {
  const std::string cwd = fresh("cwd1"), root = fresh("root1");
  touch(cwd + "/data/x.fasta");
  touch(root + "/data/x.fasta");
  // Found from the current directory: kept exactly as written.
  EXPECT_EQ(resolve_input_path("dataset.path", "data/x.fasta", {root}, cwd), "data/x.fasta");
  EXPECT_EQ(resolve_input_path("dataset.path", "", {root}, cwd), "");
}

TEST(ConfigSearch, RelativePathFallsBackToTheShippedTree) {
  const std::string cwd = fresh("cwd2"), first = fresh("root2a"), second = fresh("root2b");
  touch(second + "/data/x.fasta");
  touch(second + "/data/y.fasta");
  touch(first + "/data/y.fasta");
  touch(cwd + "/mine.fasta");
  fs::create_directories(second + "/models/m");
  // The first shipped tree that has it wins; each list entry on its own; globs count by match.
  EXPECT_EQ(resolve_input_path("dataset.path", "data/x.fasta", {first, second}, cwd), second + "/data/x.fasta");
  EXPECT_EQ(resolve_input_path("dataset.path", "data/y.fasta", {first, second}, cwd), first + "/data/y.fasta");
  EXPECT_EQ(resolve_input_path("dataset.path", "mine.fasta, data/x.fasta", {first, second}, cwd),
            "mine.fasta," + second + "/data/x.fasta");
  EXPECT_EQ(resolve_input_path("dataset.path", "data/*.fasta", {second}, cwd), second + "/data/*.fasta");
  EXPECT_EQ(resolve_input_path("model.init_from", "models/m", {second}, cwd), second + "/models/m");
  // An absolute path is never rewritten (its reader reports it when missing).
  EXPECT_EQ(resolve_input_path("dataset.path", "/no/such/file.fasta", {second}, cwd), "/no/such/file.fasta");
}

TEST(ConfigSearch, MissingPathNamesEveryPlaceTried) {
  const std::string cwd = fresh("cwd3"), root = fresh("root3");
  const std::string msg =
      error_of([&] { resolve_input_path("dataset.val_path", "data/missing.fasta", {root}, cwd); });
  EXPECT_NE(msg.find("dataset.val_path"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'data/missing.fasta'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(cwd + "/data/missing.fasta (from the current directory)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(root + "/data/missing.fasta (biofm's shipped tree)"), std::string::npos) << msg;
  const std::string glob_msg = error_of([&] { resolve_input_path("dataset.path", "data/*.fa", {root}, cwd); });
  EXPECT_NE(glob_msg.find(root + "/data/*.fa"), std::string::npos) << glob_msg;
}

TEST(ConfigSearch, ShippedRootsIncludeTheSourceTree) {
  // The test binary is not installed: its shipped tree is the source tree it was built from.
  const auto roots = shipped_roots();
  std::error_code ec;
  bool has_source = false;
  for (const auto& r : roots) has_source = has_source || fs::equivalent(r, BIOFM_SOURCE_DIR, ec);
  EXPECT_TRUE(has_source);
  // So the shipped configs' sample paths resolve from anywhere.
  TrainConfig cfg;
  cfg.dataset.path = "data/proteins_sample.fasta";
  cfg.dataset.val_path = "data/proteins_val.fasta";
  resolve_input_paths(cfg, roots);
  EXPECT_TRUE(fs::exists(cfg.dataset.path)) << cfg.dataset.path;
  EXPECT_TRUE(fs::exists(cfg.dataset.val_path)) << cfg.dataset.val_path;
  EXPECT_EQ(cfg.model.init_from, "");
}

// With --config-dir, the directories are searched as one: a config missing from all of them
// (here a misspelt `defaults:` entry) is named with the directories searched, not the temporary
// directory that joins them.
TEST(ConfigSearch, MissingConfigNamesTheSearchPath) {
  const std::string mine = fresh("configs");
  std::ofstream(mine + "/mine.yaml") << "defaults: [esm2_bse]\nnum_train_steps: 3\n";
  const std::string shipped = std::string(BIOFM_SOURCE_DIR) + "/configs";
  const std::string msg = error_of([&] { load_train_config_searched({mine, shipped}, "mine", {}); });
  EXPECT_NE(msg.find("config 'esm2_bse' not found on the config search path (no esm2_bse.yaml in " + mine + ", " +
                     shipped + ") (listed in 'defaults' of " + mine + "/mine.yaml:1); did you mean 'esm2_base'?"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("biofm_configs_"), std::string::npos) << msg;  // (the overlay's temporary name)
  const std::string top = error_of([&] { load_train_config_searched({mine, shipped}, "minee", {}); });
  EXPECT_NE(top.find("config 'minee' not found on the config search path (no minee.yaml in "), std::string::npos) << top;
}

// A config name found in more than one directory of the search path loads the first one and says
// which other files it shadows (a ./configs/NAME.yaml behind the shipped one, say); identical
// copies (an installed biofm's and its source tree's) shadow nothing.
TEST(ConfigSearch, ShadowedConfigIsNoted) {
  const std::string first = fresh("shadow_a"), copy = fresh("shadow_b"), mine = fresh("shadow_c");
  std::ofstream(first + "/run.yaml") << "num_train_steps: 5\n";
  std::ofstream(copy + "/run.yaml") << "num_train_steps: 5\n";
  std::ofstream(mine + "/run.yaml") << "num_train_steps: 7\n";
  std::ofstream(mine + "/only.yaml") << "seed: 1\n";
  EXPECT_EQ(config_files_named({first, copy, mine}, "run"),
            (std::vector<std::string>{first + "/run.yaml", copy + "/run.yaml", mine + "/run.yaml"}));
  EXPECT_EQ(shadowed_config_note({first, copy, mine}, "run"),
            "config 'run' is " + first + "/run.yaml, the first on the config search path; " + mine +
                "/run.yaml is not used (--config-dir DIR puts DIR first)");
  EXPECT_EQ(shadowed_config_note({first, copy}, "run"), "");
  EXPECT_EQ(shadowed_config_note({first, mine}, "only"), "");
  // The run's config.yaml header: the file loaded and the command line's overrides.
  EXPECT_EQ(config_provenance({mine, first}, "run", {"seed=3", "optimizer.lr=1e-4"}),
            "loaded from: " + mine + "/run.yaml\noverrides: seed=3 optimizer.lr=1e-4");
  EXPECT_EQ(config_provenance({first}, "run", {}), "loaded from: " + first + "/run.yaml\noverrides: (none)");
}
