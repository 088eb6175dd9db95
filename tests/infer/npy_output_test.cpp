// NpyOutput: arrays numpy can read (header checked byte for byte against the format), pieces
// written at their rows' offsets in any order, resume after a kill, refusal of another run.
#include "biofm/infer/npy_output.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/atomic_file.h"
#include "e2e/cli_run.h"

namespace fs = std::filesystem;
using namespace biofm;
using infer::NpyOutput;

namespace {

const infer::RunKey kRunA("run A");

// A .npy file's header dict and its data (the format: magic, version 1.0, uint16 length).
struct Npy {
  std::string dict;
  std::string data;
};
Npy read_npy(const std::string& path) {
  const std::string b = read_file(path);
  EXPECT_GE(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t len = size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8;
  EXPECT_EQ((10 + len) % 64, 0u) << "data aligned to 64 bytes";
  return {b.substr(10, len), b.substr(10 + len)};
}

Tensor rows_f32(int64_t first, int64_t n, int64_t H) {
  Tensor t = Tensor::empty({n, H}, DType::F32);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < H; ++h) t.f32()[i * H + h] = float((first + i) * 100 + h);
  return t;
}

}  // namespace

TEST(NpyOutput, HeaderIsNumpyFormat) {
  const std::string h2 = infer::npy_header("<f4", {3, 4});
  EXPECT_EQ(h2.size() % 64, 0u);
  EXPECT_NE(h2.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"), std::string::npos) << h2;
  EXPECT_EQ(h2.back(), '\n');
  const std::string h1 = infer::npy_header("<i8", {7});
  EXPECT_NE(h1.find("'shape': (7,), }"), std::string::npos) << h1;
}

TEST(NpyOutput, PiecesLandAtTheirRowsAndResume) {
  const std::string d = testkit::fresh_dir("npy_output");
  const int64_t total = 10, H = 3;
  {
    NpyOutput out(d, kRunA, 4, total);
    EXPECT_FALSE(out.have(0, 4));
    // Out of order, as a resumed or parallel run might write them.
    out.write(8, 2, {{"embeddings", rows_f32(8, 2, H)}, {"ids", Tensor::from_i32({2}, {8, 9})}});
    out.write(0, 4, {{"embeddings", rows_f32(0, 4, H)}, {"ids", Tensor::from_i32({4}, {0, 1, 2, 3})}});
  }
  {
    NpyOutput again(d, kRunA, 4, total);  // a later run of the same command
    EXPECT_TRUE(again.have(0, 4));
    EXPECT_TRUE(again.have(8, 2));
    EXPECT_FALSE(again.have(4, 4));
    again.write(4, 4, {{"embeddings", rows_f32(4, 4, H)}, {"ids", Tensor::from_i32({4}, {4, 5, 6, 7})}});
    again.finish({"a", "b\twith tab", "c", "d", "e", "f", "g", "h", "i", "j"}, R"({"k": 1})");
  }
  const Npy e = read_npy(d + "/embeddings.npy");
  EXPECT_NE(e.dict.find("'shape': (10, 3)"), std::string::npos) << e.dict;
  ASSERT_EQ(e.data.size(), size_t(total * H * 4));
  std::vector<float> got(size_t(total * H));
  std::memcpy(got.data(), e.data.data(), e.data.size());
  for (int64_t r = 0; r < total; ++r)
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(got[size_t(r * H + h)], float(r * 100 + h)) << r << "," << h;
  const Npy ids = read_npy(d + "/ids.npy");
  EXPECT_NE(ids.dict.find("'descr': '<i4'"), std::string::npos);
  EXPECT_NE(ids.dict.find("'shape': (10,)"), std::string::npos);
  const std::string names = read_file(d + "/names.tsv");
  EXPECT_EQ(names.substr(0, 9), "row\tname\n");
  EXPECT_NE(names.find("1\tb with tab\n"), std::string::npos) << names;
  const auto index = nlohmann::json::parse(read_file(d + "/index.json"));
  EXPECT_EQ(index["num_records"], 10);
  EXPECT_EQ(index["arrays"]["embeddings"]["shape"], nlohmann::json({10, 3}));
  EXPECT_EQ(index["summary"]["k"], 1);
}

TEST(NpyOutput, RefusesAnotherRunAndRaggedOrDamagedInput) {
  const std::string d = testkit::fresh_dir("npy_output_refuse");
  {
    NpyOutput out(d, kRunA, 4, 8);
    out.write(0, 4, {{"embeddings", rows_f32(0, 4, 2)}});
    // A tensor that is not one row per record (per-token states) is refused.
    EXPECT_THROW(out.write(4, 4, {{"tokens", rows_f32(0, 9, 2)}}), Error);
  }
  EXPECT_THROW(NpyOutput(d, infer::RunKey("run B"), 4, 8), Error);  // another command's directory
  EXPECT_THROW(NpyOutput(d, kRunA, 2, 8), Error);  // another piece size
  fs::resize_file(d + "/embeddings.npy", 20);         // a truncated array
  EXPECT_THROW(NpyOutput(d, kRunA, 4, 8), Error);
  write_file_atomic(d + "/progress.json", "{not json");
  EXPECT_THROW(NpyOutput(d, kRunA, 4, 8), Error);
}
