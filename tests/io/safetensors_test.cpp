#include "biofm/io/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "biofm/io/atomic_file.h"

using namespace biofm;
namespace fs = std::filesystem;

static std::string temp_path(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("biofm_st_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

TEST(IoSafetensors, RoundTrip) {
  std::string p = temp_path("rt.safetensors");
  Tensor a = Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from_i32({4}, {7, -8, 9, 10});
  Tensor c = a.to(DType::BF16);
  write_safetensors(p, {{"a", a}, {"b", b}, {"c", c}}, {{"format", "pt"}});
  SafetensorsFile f = read_safetensors(p);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.get("a").shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(f.get("a").f32()[5], 6.0f);
  EXPECT_EQ(f.get("b").i32()[1], -8);
  EXPECT_EQ(f.get("c").dtype(), DType::BF16);
  EXPECT_FLOAT_EQ(f.get("c").to(DType::F32).f32()[2], 3.0f);
  EXPECT_THROW(f.get("missing"), Error);
}

TEST(IoSafetensors, CorruptFilesFailClearly) {
  std::string p = temp_path("bad.safetensors");
  write_file_atomic(p, "abc");
  EXPECT_THROW(read_safetensors(p), Error);
  std::string good = temp_path("good.safetensors");
  write_safetensors(good, {{"a", Tensor::from_f32({4}, {1, 2, 3, 4})}});
  std::string bytes = read_file(good);
  write_file_atomic(p, bytes.substr(0, bytes.size() - 4));  // truncated data
  try {
    read_safetensors(p);
    FAIL() << "truncated file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos);
  }
  std::string garbled = bytes;
  garbled[10] = '{';
  garbled[11] = '{';
  write_file_atomic(p, garbled);
  EXPECT_THROW(read_safetensors(p), Error);
  EXPECT_THROW(read_safetensors(temp_path("does_not_exist.safetensors")), Error);
}
