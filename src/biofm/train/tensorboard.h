// TensorBoard event files written natively: TFRecord framing (length, masked CRC32C of the
// length, payload, masked CRC32C of the payload) around protobuf-encoded
// Event{wall_time=1, step=2, file_version=3, summary=5{value=1{tag=1, simple_value=2}}}.
// The first record is the Event{file_version: "brain.Event:2"} TensorBoard expects.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace biofm {

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), and TFRecord's masked form.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

// The protobuf bytes of one Event (exposed for tests).
std::string encode_scalar_event(double wall_time, int64_t step,
                                const std::vector<std::pair<std::string, float>>& values);
std::string encode_file_version_event(double wall_time);

class TfEventWriter {
 public:
  // Creates dir and dir/events.out.tfevents.<unix time>.<host> with the file_version record.
  explicit TfEventWriter(const std::string& dir);
  void add_scalars(int64_t step, double wall_time, const std::vector<std::pair<std::string, float>>& values);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::ofstream out_;
  std::string path_;
};

}  // namespace biofm
