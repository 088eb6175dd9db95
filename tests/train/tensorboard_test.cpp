// TensorBoard event files, read back by a reader written here from the formats' definitions
// (bitwise CRC32C, a generic protobuf field decoder) rather than through the writer's helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "biofm/train/metrics.h"
#include "biofm/train/tensorboard.h"

namespace fs = std::filesystem;
using namespace biofm;

namespace {

uint32_t crc32c_bitwise(const std::string& s) {
  uint32_t c = ~0u;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xA282EAD8u; }

template <class T>
T read_le(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

// Protobuf fields of one message: field number -> values (varint, fixed64/32 as raw bytes,
// length-delimited as bytes).
struct Field {
  int wire;
  uint64_t varint = 0;
  std::string bytes;
};

std::multimap<int, Field> decode(const std::string& m) {
  std::multimap<int, Field> out;
  size_t i = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      EXPECT_LT(i, m.size());
      if (i >= m.size()) return v;
      const uint8_t b = uint8_t(m[i++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < m.size()) {
    const uint64_t key = varint();
    Field f{int(key & 7)};
    if (f.wire == 0) f.varint = varint();
    else if (f.wire == 1) f.bytes = m.substr(i, 8), i += 8;
    else if (f.wire == 5) f.bytes = m.substr(i, 4), i += 4;
    else if (f.wire == 2) {
      const uint64_t n = varint();
      f.bytes = m.substr(i, n), i += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << f.wire;
      break;
    }
    out.emplace(int(key >> 3), f);
  }
  EXPECT_EQ(i, m.size());
  return out;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;
};

std::vector<Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  std::vector<Event> events;
  size_t at = 0;
  while (at < data.size()) {
    EXPECT_LE(at + 12, data.size());
    const uint64_t len = read_le<uint64_t>(data, at);
    EXPECT_EQ(read_le<uint32_t>(data, at + 8), masked(crc32c_bitwise(data.substr(at, 8)))) << "length CRC";
    const std::string payload = data.substr(at + 12, len);
    EXPECT_EQ(read_le<uint32_t>(data, at + 12 + len), masked(crc32c_bitwise(payload))) << "payload CRC";
    at += 12 + len + 4;
    Event e;
    for (const auto& [num, f] : decode(payload)) {
      if (num == 1) e.wall_time = read_le<double>(f.bytes, 0);
      if (num == 2) e.step = int64_t(f.varint);
      if (num == 3) e.file_version = f.bytes;
      if (num == 5)
        for (const auto& [vn, vf] : decode(f.bytes)) {
          EXPECT_EQ(vn, 1);
          auto value = decode(vf.bytes);
          e.scalars[value.find(1)->second.bytes] = read_le<float>(value.find(2)->second.bytes, 0);
        }
    }
    events.push_back(e);
  }
  EXPECT_EQ(at, data.size());
  return events;
}

}  // namespace

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(crc32c_bitwise("hello tensorboard"), crc32c("hello tensorboard", 17));
}

TEST(TensorBoard, WritesScalarsAnIndependentReaderDecodes) {
  const std::string dir = testing::TempDir() + "/biofm_tb_writer";
  fs::remove_all(dir);
  std::string path;
  {
    TfEventWriter w(dir);
    path = w.path();
    w.add_scalars(1, 1700000000.25, {{"train/loss", 3.5f}, {"train/learning_rate", 1e-4f}});
    w.add_scalars(300, 1700000100.5, {{"train/loss", 2.75f}, {"val/loss", 2.5f}});
  }
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir));
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
  const auto ev = read_events(path);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].file_version, "brain.Event:2");
  EXPECT_GT(ev[0].wall_time, 1.6e9);
  EXPECT_EQ(ev[1].step, 1);
  EXPECT_EQ(ev[1].wall_time, 1700000000.25);
  EXPECT_EQ(ev[1].scalars.at("train/loss"), 3.5f);
  EXPECT_EQ(ev[1].scalars.at("train/learning_rate"), 1e-4f);
  EXPECT_EQ(ev[2].step, 300);  // a multi-byte varint
  EXPECT_EQ(ev[2].scalars.size(), 2u);
  EXPECT_EQ(ev[2].scalars.at("val/loss"), 2.5f);
}

TEST(TensorBoard, SinkWritesTheRecipeKeysOfARecord) {
  const std::string dir = testing::TempDir() + "/biofm_tb_sink";
  fs::remove_all(dir);
  std::string path;
  {
    TensorBoardSink sink(dir);
    path = sink.path();
    sink.write(with_standard_keys({{"step", 10}, {"loss", 2.0}, {"lr", 0.001}, {"eta_s", 5.0}}));
    sink.write(with_standard_keys({{"step", 20}, {"val_loss", 1.5}, {"val_perplexity", 4.48}, {"val_accuracy", 0.4}}));
  }
  const auto ev = read_events(path);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].step, 10);
  EXPECT_EQ(ev[1].scalars.size(), 3u);  // train/loss, train/learning_rate, train/global_step; not eta_s or loss
  EXPECT_EQ(ev[1].scalars.at("train/loss"), 2.0f);
  EXPECT_EQ(ev[1].scalars.at("train/learning_rate"), 0.001f);
  EXPECT_EQ(ev[1].scalars.at("train/global_step"), 10.0f);
  EXPECT_EQ(ev[2].step, 20);
  EXPECT_EQ(ev[2].scalars.at("val/accuracy"), 0.4f);
  EXPECT_GT(ev[2].wall_time, 1.6e9);
}

TEST(Metrics, StandardKeysAndTimestamps) {
  using namespace std::chrono;
  const auto t = system_clock::time_point(milliseconds(1763866121123));  // 2025-11-23T02:48:41.123Z
  EXPECT_EQ(iso8601_utc(t), "2025-11-23T02:48:41.123Z");
  auto r = with_standard_keys({{"step", 5}, {"loss", 2.5}, {"perplexity", 12.18}, {"lr", 1e-3}, {"grad_norm", 0.7},
                               {"step_time", 0.25}, {"tokens_per_sec", 100.0}, {"unpadded_tokens_per_sec", 90.0},
                               {"unpadded_tokens_per_step", 22.5}, {"mfu_seed", 0.4}, {"gpu_mem_peak_gib", 3.0},
                               {"gpu_mem_allocated_max_gib", 2.5}, {"gpu_mem_allocated_mean_gib", 1.5},
                               {"gpu_sm_clock_mhz", 1785.0}, {"gpu_power_w", 690.0}, {"gpu_temperature_c", 64.0},
                               {"gpu_power_capped_fraction", 1.0}},
                              t);
  EXPECT_EQ(r["timestamp"], "2025-11-23T02:48:41.123Z");
  EXPECT_DOUBLE_EQ(r["wall_time"].get<double>(), 1763866121.123);
  EXPECT_EQ(r["train/loss"], 2.5);
  EXPECT_EQ(r["loss"], 2.5);  // ours stay
  EXPECT_EQ(r["train/learning_rate"], 1e-3);
  EXPECT_EQ(r["train/grad_norm"], 0.7);
  EXPECT_EQ(r["train/tokens_per_second_per_gpu"], 100.0);
  EXPECT_EQ(r["train/unpadded_tokens_per_second_per_gpu"], 90.0);
  EXPECT_EQ(r["train/mfu"], 0.4);
  EXPECT_EQ(r["train/gpu_memory_peak_gib"], 3.0);  // ours, kept (biofm report charts it)
  // The rest of the recipes' perf_logger names.
  EXPECT_EQ(r["train/perplexity"], 12.18);
  EXPECT_EQ(r["train/step_time"], 0.25);
  EXPECT_EQ(r["train/global_step"], 5);
  EXPECT_EQ(r["train/total_unpadded_tokens_per_batch"], 22.5);
  EXPECT_EQ(r["train/gpu_memory_allocated_max_gb"], 2.5);  // GiB, as the recipes' / 1024**3
  EXPECT_EQ(r["train/gpu_memory_allocated_mean_gb"], 1.5);
  EXPECT_EQ(r["gpu/sm_clock_mhz"], 1785.0);  // the window's GPU (core/gpu_monitor.h)
  EXPECT_EQ(r["gpu/power_w"], 690.0);
  EXPECT_EQ(r["gpu/temperature_c"], 64.0);
  EXPECT_EQ(r["gpu/power_capped_fraction"], 1.0);
  EXPECT_FALSE(r.contains("val/loss"));
  auto v = with_standard_keys({{"step", 5}, {"val_loss", 2.0}, {"val_perplexity", 7.4}, {"val_accuracy", 0.3}}, t);
  EXPECT_EQ(v["val/loss"], 2.0);
  EXPECT_EQ(v["val/perplexity"], 7.4);
  EXPECT_EQ(v["val/accuracy"], 0.3);
  EXPECT_FALSE(v.contains("train/loss"));
  EXPECT_FALSE(v.contains("train/global_step"));  // training records only
}

TEST(Metrics, PerplexityStaysFinite) {
  EXPECT_DOUBLE_EQ(perplexity_of(2.0), std::exp(2.0));
  EXPECT_DOUBLE_EQ(perplexity_of(0.0), 1.0);
  // A diverging loss gives a large finite perplexity: JSON has no inf, TensorBoard stores floats.
  EXPECT_DOUBLE_EQ(perplexity_of(1e6), std::exp(kMaxLogPerplexity));
  EXPECT_TRUE(std::isfinite(float(perplexity_of(std::numeric_limits<double>::infinity()))));
  EXPECT_TRUE(std::isnan(perplexity_of(std::nan(""))));
  const nlohmann::json big = {{"p", perplexity_of(500.0)}};
  EXPECT_TRUE(big["p"].is_number());
  EXPECT_EQ(big.dump().find("null"), std::string::npos);  // (inf would dump as null)
}

// The recipes' names reach the event file as scalars at the record's step.
// The progress line prints a diverging run's perplexity in %g style, not 35 digits cut at the buffer.
TEST(Metrics, PerplexityTextOfALargeValueIsShort) {
  EXPECT_EQ(perplexity_text(12.1826), "12.183");
  EXPECT_EQ(perplexity_text(perplexity_of(1e6)), "5.54e+34");
  EXPECT_EQ(perplexity_text(std::nan("")), "nan");
  EXPECT_EQ(perplexity_text(std::numeric_limits<double>::infinity()), "inf");
}

TEST(TensorBoard, RecipeNamesOfATrainingRecord) {
  const std::string dir = testing::TempDir() + "/tb_recipe_names";
  fs::remove_all(dir);
  std::string path;
  {
    TensorBoardSink sink(dir);
    path = sink.path();
    sink.write(with_standard_keys({{"step", 30}, {"loss", 2.0}, {"perplexity", perplexity_of(2.0)}, {"step_time", 0.5},
                                   {"unpadded_tokens_per_step", 4000.0}, {"gpu_mem_allocated_max_gib", 7.5},
                                   {"gpu_mem_allocated_mean_gib", 6.0}}));
  }
  const auto ev = read_events(path);
  ASSERT_EQ(ev.size(), 2u);
  const auto& sc = ev[1].scalars;
  EXPECT_EQ(ev[1].step, 30);
  EXPECT_EQ(sc.at("train/loss"), 2.0f);
  EXPECT_EQ(sc.at("train/perplexity"), float(std::exp(2.0)));
  EXPECT_EQ(sc.at("train/step_time"), 0.5f);
  EXPECT_EQ(sc.at("train/global_step"), 30.0f);
  EXPECT_EQ(sc.at("train/total_unpadded_tokens_per_batch"), 4000.0f);
  EXPECT_EQ(sc.at("train/gpu_memory_allocated_max_gb"), 7.5f);
  EXPECT_EQ(sc.at("train/gpu_memory_allocated_mean_gb"), 6.0f);
}
