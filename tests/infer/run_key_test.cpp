// RunKey: the identity of an embed output does not depend on how its paths are spelled or on
// the working directory, and keys stored before paths were normalized still match.
#include "biofm/infer/run_key.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using biofm::infer::RunKey;

namespace {

RunKey embed_key(const std::string& model, const std::string& input, int layer = -1) {
  RunKey k("embed");
  k.path("model", model).paths("input", input).add("layers", "[" + std::to_string(layer) + "]").add("records", 40);
  return k;
}

// Runs f with `dir` as the working directory.
template <class F>
void in_dir(const std::string& dir, F f) {
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  f();
  fs::current_path(before);
}

}  // namespace

TEST(RunKey, PathsAreNormalizedWhateverTheSpellingAndDirectory) {
  const std::string d = fs::weakly_canonical(biofm::testkit::fresh_dir("run_key")).string();
  fs::create_directories(d + "/esm_run/final_model");
  std::string key;
  in_dir(d, [&] { key = embed_key("esm_run/final_model", "in.fasta,data/*.fa").str(); });
  EXPECT_EQ(key, "embed model=" + d + "/esm_run/final_model input=" + d + "/in.fasta," + d + "/data/*.fa layers=[-1] records=40");
  in_dir(d + "/esm_run", [&] {
    EXPECT_EQ(embed_key("./final_model/", "../in.fasta, ../data/*.fa").str(), key);
    EXPECT_TRUE(embed_key(".//final_model/.", "../in.fasta,../data/*.fa").matches(key));
  });
  EXPECT_EQ(embed_key(d + "/esm_run/../esm_run/final_model", d + "/in.fasta," + d + "/data/*.fa").str(), key);
  // Another model, input or option is another run.
  EXPECT_FALSE(embed_key(d + "/esm_run", d + "/in.fasta," + d + "/data/*.fa").matches(key));
  EXPECT_FALSE(embed_key(d + "/esm_run/final_model", d + "/in.fasta").matches(key));
  EXPECT_FALSE(embed_key(d + "/esm_run/final_model", d + "/in.fasta," + d + "/data/*.fa", 0).matches(key));
}

TEST(RunKey, AKeyStoredWithPathsAsSpelledStillMatches) {
  const std::string d = fs::weakly_canonical(biofm::testkit::fresh_dir("run_key_old")).string();
  fs::create_directories(d + "/esm_run/final_model");
  // What embed stored before: the paths as given on the command line.
  const std::string old = "embed model=esm_run/final_model input=in.fasta layers=[-1] records=40";
  in_dir(d, [&] {
    EXPECT_TRUE(embed_key("./esm_run/final_model/", "in.fasta").matches(old));
    EXPECT_TRUE(embed_key(d + "/esm_run/final_model", "./in.fasta").matches(old));
    EXPECT_FALSE(embed_key("./esm_run/final_model/", "other.fasta").matches(old));
    EXPECT_FALSE(embed_key("./esm_run/final_model/", "in.fasta", 0).matches(old));
    EXPECT_FALSE(embed_key("./esm_run/final_model/", "in.fasta").matches("score model=esm_run/final_model"));
    EXPECT_FALSE(embed_key("./esm_run/final_model/", "in.fasta").matches("embed model=esm_run/final_model"));
  });
}
