#include "biofm/train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "biofm/core/error.h"

namespace biofm {

namespace {

const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> r{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      r[i] = c;
    }
    return r;
  }();
  return t;
}

// Protobuf wire format: a key is (field << 3) | wire type; 0 = varint, 1 = fixed64,
// 2 = length-delimited, 5 = fixed32. Fixed-width values are little-endian.
void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(char((v & 0x7F) | 0x80));
    v >>= 7;
  }
  s.push_back(char(v));
}

void put_key(std::string& s, int field, int wire) { put_varint(s, uint64_t(field) << 3 | uint64_t(wire)); }

template <class T>
void put_le(std::string& s, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86/ARM hosts are little-endian
  s.append(reinterpret_cast<const char*>(b), sizeof(T));
}

void put_bytes(std::string& s, int field, const std::string& bytes) {
  put_key(s, field, 2);
  put_varint(s, bytes.size());
  s += bytes;
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, 1);
  put_le(e, wall_time);
  if (step != 0) {  // proto3 leaves default values out
    put_key(e, 2, 0);
    put_varint(e, uint64_t(step));
  }
  return e;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string encode_scalar_event(double wall_time, int64_t step,
                                const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, 1, tag);
    put_key(value, 2, 5);
    put_le(value, v);
    put_bytes(summary, 1, value);
  }
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string encode_file_version_event(double wall_time) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

TfEventWriter::TfEventWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create TensorBoard directory '", dir, "': ", ec.message());
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A resumed run in the same second gets a distinct file: TensorBoard reads every file.
  for (int i = 0;; ++i) {
    path_ = dir + "/events.out.tfevents." + std::to_string(int64_t(now)) + "." + host_name() +
            (i ? "." + std::to_string(i) : "");
    if (!std::filesystem::exists(path_)) break;
  }
  out_.open(path_, std::ios::binary);
  if (!out_) fail("cannot write TensorBoard event file '", path_, "'");
  write_record(encode_file_version_event(now));
}

void TfEventWriter::add_scalars(int64_t step, double wall_time,
                                const std::vector<std::pair<std::string, float>>& values) {
  write_record(encode_scalar_event(wall_time, step, values));
}

void TfEventWriter::write_record(const std::string& payload) {
  std::string rec;
  put_le(rec, uint64_t(payload.size()));
  put_le(rec, masked_crc32c(rec.data(), 8));
  rec += payload;
  put_le(rec, masked_crc32c(payload.data(), payload.size()));
  out_.write(rec.data(), std::streamsize(rec.size()));
  out_.flush();
  if (!out_) fail("writing TensorBoard event file '", path_, "' failed");
}

}  // namespace biofm
