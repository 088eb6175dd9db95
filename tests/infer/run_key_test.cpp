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

// Content fields compare fingerprints: the same content under another path matches, other
// content under the same path does not; a key stored with the path alone (older versions)
// matches by path.
TEST(RunKey, ContentFieldsCompareFingerprints) {
  auto key = [](const std::string& model, uint64_t model_fp, const std::string& input, uint64_t input_fp) {
    RunKey k("embed");
    k.content("model", model, model_fp).content_list("input", input, input_fp).add("records", 40);
    return k;
  };
  const std::string stored = key("/a/model", 0x1234, "/a/in.fasta", 0xabcd).str();
  EXPECT_EQ(stored, "embed model=/a/model#0000000000001234 input=/a/in.fasta#000000000000abcd records=40");
  EXPECT_TRUE(key("/mnt/b/model", 0x1234, "/mnt/b/in.fasta", 0xabcd).matches(stored));
  EXPECT_FALSE(key("/a/model", 0x1235, "/a/in.fasta", 0xabcd).matches(stored));
  EXPECT_FALSE(key("/a/model", 0x1234, "/a/in.fasta", 0xabce).matches(stored));
  const std::string old = "embed model=/a/model input=/a/in.fasta records=40";
  EXPECT_TRUE(key("/a/model", 0x1234, "/a/in.fasta", 0xabcd).matches(old));
  EXPECT_FALSE(key("/mnt/b/model", 0x1234, "/a/in.fasta", 0xabcd).matches(old));
  // (a '#' in a path is part of the path)
  const std::string hashed = key("/a/run#2/model", 7, "/a/in.fasta", 9).str();
  EXPECT_TRUE(key("/z/model", 7, "/z/in.fasta", 9).matches(hashed));
  EXPECT_TRUE(key("/a/run#2/model", 1, "/a/in.fasta", 1).matches("embed model=/a/run#2/model input=/a/in.fasta records=40"));
}
