// infer/fingerprint.h: a model directory's and an input's fingerprints follow their content,
// not their place.
#include "biofm/infer/fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm::infer;

TEST(InferFingerprint, ModelDirectoryByContent) {
  const std::string d = biofm::testkit::fresh_dir("fingerprint");
  const std::string fixture = biofm::testkit::src("tests/fixtures/esm2_tiny");
  fs::copy(fixture, d + "/one", fs::copy_options::recursive);
  fs::copy(fixture, d + "/two", fs::copy_options::recursive);
  const uint64_t a = model_dir_fingerprint(d + "/one");
  EXPECT_EQ(model_dir_fingerprint(d + "/two"), a);
  EXPECT_EQ(model_dir_fingerprint(fixture), a);
  // Weights changed (the last bytes, the middle) or config.json changed: another fingerprint.
  auto poke = [](const std::string& path, std::streamoff at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(char(c ^ 0x5a));
  };
  poke(d + "/one/model.safetensors", std::streamoff(fs::file_size(d + "/one/model.safetensors") - 1));
  const uint64_t b = model_dir_fingerprint(d + "/one");
  EXPECT_NE(b, a);
  poke(d + "/two/model.safetensors", std::streamoff(fs::file_size(d + "/two/model.safetensors") / 2) & ~4095);
  EXPECT_NE(model_dir_fingerprint(d + "/two"), a);
  std::ofstream(d + "/one/config.json", std::ios::app) << " ";
  EXPECT_NE(model_dir_fingerprint(d + "/one"), b);
}

TEST(InferFingerprint, RecordsInOrderWithTheirNames) {
  auto of = [](std::initializer_list<std::pair<const char*, const char*>> records) {
    RecordsFingerprint f;
    for (const auto& [n, s] : records) f.add(n, s);
    return f.value();
  };
  const uint64_t ab = of({{"a", "MKV"}, {"b", "AC"}});
  EXPECT_EQ(of({{"a", "MKV"}, {"b", "AC"}}), ab);
  EXPECT_NE(of({{"b", "AC"}, {"a", "MKV"}}), ab);
  EXPECT_NE(of({{"a", "MKVA"}, {"b", "C"}}), ab);
  EXPECT_NE(of({{"a", "MKV"}, {"c", "AC"}}), ab);
  EXPECT_NE(of({{"a", "MKV"}}), ab);
  EXPECT_NE(of({}), of({{"", ""}}));
}
