// Input validation at the io boundary: UTF-8 cleaning, checkpoint manifests and trainer
// state, safetensors shapes that would overflow.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/checkpoint_manifest.h"
#include "biofm/io/safetensors.h"
#include "biofm/io/utf8.h"

using namespace biofm;

namespace {

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string safetensors_bytes(const std::string& header, size_t payload) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(payload, '\0');
}

}  // namespace

TEST(Utf8, ValidTextIsKeptInvalidBytesAreReplaced) {
  EXPECT_TRUE(is_valid_utf8("sp|P12345|caf\xC3\xA9"));
  EXPECT_FALSE(is_valid_utf8("caf\xE9"));            // Latin-1
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));           // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));       // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));   // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));           // truncated
  EXPECT_EQ(to_valid_utf8("caf\xE9!"), "caf\xEF\xBF\xBD!");
  EXPECT_EQ(to_valid_utf8("ok \xF0\x9F\x98\x80"), "ok \xF0\x9F\x98\x80");
  for (const char* s : {"\xE9", "a\xC3", "\xFF\xFE", "\xE2\x82x"}) EXPECT_TRUE(is_valid_utf8(to_valid_utf8(s))) << s;
  Utf8Cleaner clean("in.fasta");
  testing::internal::CaptureStderr();
  const std::string a = clean("x\xE9"), b = clean("y\xE9"), c = clean("z");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(clean.replaced(), 2u);
  EXPECT_EQ(c, "z");
  EXPECT_NO_THROW((void)nlohmann::json(a).dump());
  // Said once, naming the file.
  EXPECT_NE(err.find("in.fasta"), std::string::npos) << err;
  EXPECT_EQ(err.find("in.fasta"), err.rfind("in.fasta")) << err;
}

TEST(CheckpointManifest, ValidJsonWithMissingOrWrongFieldsIsAnError) {
  const auto m = parse_checkpoint_manifest(R"({"files": {"a.safetensors": {"bytes": 10, "crc32": 7}}})", "m.json");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].bytes, 10u);
  EXPECT_EQ(m[0].crc32, 7u);
  for (const char* bad : {"{}", "[]", "3", "not json", R"({"files": []})", R"({"files": {"a": {}}})",
                          R"({"files": {"a": {"bytes": 1}}})", R"({"files": {"a": {"crc32": 1}}})",
                          R"({"files": {"a": {"bytes": -1, "crc32": 1}}})", R"({"files": {"a": {"bytes": "1", "crc32": 1}}})",
                          R"({"files": {"a": {"bytes": 1, "crc32": 4294967296}}})", R"({"files": {"a": 5}})",
                          R"({"files": {"../x": {"bytes": 1, "crc32": 1}}})", R"({"files": {"": {"bytes": 1, "crc32": 1}}})"}) {
    const std::string msg = error_of([&] { parse_checkpoint_manifest(bad, "ck/manifest.json"); });
    EXPECT_NE(msg.find("ck/manifest.json"), std::string::npos) << bad << ": " << msg;
  }
}

TEST(CheckpointManifest, TrainerStateIsRangeChecked) {
  const auto s = parse_trainer_state(R"({"step": 5, "data_cursor": 40, "epoch": 0})", "t.json", 5);
  EXPECT_EQ(s.step, 5);
  EXPECT_EQ(s.data_cursor, 40u);
  for (const char* bad : {"{}", R"({"step": 5})", R"({"step": -1, "data_cursor": 0})", R"({"step": "5", "data_cursor": 0})",
                          R"({"step": 5, "data_cursor": -3})", R"({"step": 18446744073709551615, "data_cursor": 0})",
                          R"({"step": 6, "data_cursor": 0})"}) {
    const std::string msg = error_of([&] { parse_trainer_state(bad, "ck/trainer_state.json", 5); });
    EXPECT_NE(msg.find("ck/trainer_state.json"), std::string::npos) << bad << ": " << msg;
  }
}

TEST(SafetensorsValidation, HugeOrOverflowingShapesAreRejectedBeforeAllocation) {
  const std::string path = testing::TempDir() + "/biofm_bad_shapes.safetensors";
  for (const char* shape : {"[4611686018427387904, 4]", "[4294967296, 4294967296, 0]", "[-1]", "[1,1,1,1,1,1,1,1,1]",
                            "[3037000500, 3037000500]", "[2, 2]"}) {
    const std::string header = std::string(R"({"w": {"dtype": "F32", "shape": )") + shape +
                               R"(, "data_offsets": [0, 8]}})";
    write_file_atomic(path, safetensors_bytes(header, 8));
    const std::string msg = error_of([&] { MappedSafetensors f(path); });
    EXPECT_NE(msg.find("'w'"), std::string::npos) << shape << ": " << msg;
  }
  for (const char* header : {R"({"__metadata__": 3})", R"({"w": 5})", R"({"w": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}})",
                             R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 400]}})"}) {
    write_file_atomic(path, safetensors_bytes(header, 8));
    EXPECT_NE(error_of([&] { MappedSafetensors f(path); }).find(path), std::string::npos) << header;
  }
  // A zero-sized tensor is fine.
  write_file_atomic(path, safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [0, 5], "data_offsets": [0, 0]}})", 0));
  EXPECT_EQ(error_of([&] { MappedSafetensors f(path); }), "");
  std::filesystem::remove(path);
}
