// The coordinator's wire format: framed messages [u8 type][u32 length][payload], integers
// little-endian, strings as [u32 length][bytes].
//
//   rank > 0 → rank 0                      rank 0 → rank > 0
//   HELLO(magic, rank, world size)         WELCOME (every rank has arrived)
//   SET(key, value)                        VALUE(request id, value)
//   GET(request id, key)                   GATHERED(count, every rank's bytes in rank order)
//   GATHER(bytes)                          HEARTBEAT
//   HEARTBEAT(step, ms in step, phase)     FAILED(message)
//   BYE                                    BYE_ACK
//
// Rank 0 answers a GET once some rank has set the key; the n-th GATHER of every rank makes
// the n-th GATHERED. Rank 0's own calls go through the same handling in-process.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "biofm/dist/socket.h"

namespace biofm::coord {

constexpr uint32_t kMagic = 0x62696f66;  // "biof": a stray connection is told apart
constexpr uint32_t kMaxFrameBytes = 256u << 20;

enum class Msg : uint8_t {
  hello = 1,
  welcome,
  set,
  get,
  value,
  gather,
  gathered,
  heartbeat,
  failed,
  bye,
  bye_ack,
};

const char* msg_name(Msg m);

struct Frame {
  Msg type{};
  std::string payload;
};

// The bytes of one frame, ready for a single write.
std::string encode(Msg type, std::string_view payload = {});

// Builds a payload.
class PayloadWriter {
 public:
  PayloadWriter& u32(uint32_t v);
  PayloadWriter& u64(uint64_t v);
  PayloadWriter& str(std::string_view s);
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

// Reads a payload; a payload shorter than its fields claim throws biofm::Error.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view bytes) : rest_(bytes) {}
  uint32_t u32();
  uint64_t u64();
  std::string str();
  bool done() const { return rest_.empty(); }

 private:
  std::string_view take(size_t n);
  std::string_view rest_;
};

// Collects the bytes of a connection as they arrive and cuts them into frames.
class FrameBuffer {
 public:
  void append(const char* data, size_t n) { bytes_.append(data, n); }
  // The next complete frame; nullopt until all of it has arrived. Throws on a frame that
  // cannot be ours (unknown type, absurd length): the connection is then dropped.
  std::optional<Frame> next();

 private:
  std::string bytes_;
  size_t start_ = 0;  // bytes before it were consumed
};

// Reads from fd until FrameBuffer has a frame (a blocking wait for one reply).
enum class ReadResult { frame, closed, timeout };
ReadResult read_frame(int fd, FrameBuffer& buf, Frame& out, net::Clock::time_point deadline);

// Reads whatever fd has now into buf (never blocks): false when the peer closed or the
// connection broke.
bool pump(int fd, FrameBuffer& buf);

// Payloads of the structured messages.
std::string hello_payload(int rank, int world_size);
std::string gathered_payload(const std::vector<std::string>& parts);
std::vector<std::string> parse_gathered(std::string_view payload);

}  // namespace biofm::coord
