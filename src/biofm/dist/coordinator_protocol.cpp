#include "biofm/dist/coordinator_protocol.h"

#include <poll.h>

#include "biofm/core/error.h"

namespace biofm::coord {

const char* msg_name(Msg m) {
  switch (m) {
    case Msg::hello: return "HELLO";
    case Msg::welcome: return "WELCOME";
    case Msg::set: return "SET";
    case Msg::get: return "GET";
    case Msg::value: return "VALUE";
    case Msg::gather: return "GATHER";
    case Msg::gathered: return "GATHERED";
    case Msg::heartbeat: return "HEARTBEAT";
    case Msg::failed: return "FAILED";
    case Msg::bye: return "BYE";
    case Msg::bye_ack: return "BYE_ACK";
  }
  return "?";
}

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(in[size_t(i)])) << (8 * i);
  return v;
}

constexpr size_t kHeaderBytes = 5;  // u8 type, u32 length

}  // namespace

std::string encode(Msg type, std::string_view payload) {
  BIOFM_CHECK(payload.size() <= kMaxFrameBytes, "coordinator message of ", payload.size(), " bytes");
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  out.push_back(char(type));
  put_le(out, payload.size(), 4);
  out.append(payload);
  return out;
}

PayloadWriter& PayloadWriter::u32(uint32_t v) {
  put_le(bytes_, v, 4);
  return *this;
}

PayloadWriter& PayloadWriter::u64(uint64_t v) {
  put_le(bytes_, v, 8);
  return *this;
}

PayloadWriter& PayloadWriter::str(std::string_view s) {
  u32(uint32_t(s.size()));
  bytes_.append(s);
  return *this;
}

std::string_view PayloadReader::take(size_t n) {
  if (rest_.size() < n) fail("coordinator: a message ends ", n - rest_.size(), " bytes early");
  const std::string_view out = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return out;
}

uint32_t PayloadReader::u32() { return uint32_t(get_le(take(4), 4)); }
uint64_t PayloadReader::u64() { return get_le(take(8), 8); }

std::string PayloadReader::str() {
  const uint32_t n = u32();
  return std::string(take(n));
}

std::optional<Frame> FrameBuffer::next() {
  const std::string_view pending = std::string_view(bytes_).substr(start_);
  if (pending.size() < kHeaderBytes) return std::nullopt;
  const uint8_t type = uint8_t(pending[0]);
  const uint64_t length = get_le(pending.substr(1), 4);
  if (type < uint8_t(Msg::hello) || type > uint8_t(Msg::bye_ack))
    fail("coordinator: unknown message type ", int(type));
  if (length > kMaxFrameBytes) fail("coordinator: a message claims ", length, " bytes");
  if (pending.size() < kHeaderBytes + length) return std::nullopt;
  Frame f{Msg(type), std::string(pending.substr(kHeaderBytes, size_t(length)))};
  start_ += kHeaderBytes + size_t(length);
  // Drop consumed bytes once they dominate, so the buffer does not grow without end.
  if (start_ > 4096 && start_ * 2 > bytes_.size()) {
    bytes_.erase(0, start_);
    start_ = 0;
  }
  return f;
}

bool pump(int fd, FrameBuffer& buf) {
  char chunk[1 << 16];
  for (;;) {
    const long r = net::read_some(fd, chunk, sizeof chunk);
    if (r > 0) {
      buf.append(chunk, size_t(r));
      continue;
    }
    return r == -1;  // -1: nothing more for now; 0: closed; -2: broken
  }
}

ReadResult read_frame(int fd, FrameBuffer& buf, Frame& out, net::Clock::time_point deadline) {
  for (;;) {
    if (auto f = buf.next()) {
      out = std::move(*f);
      return ReadResult::frame;
    }
    if (!net::wait_for(fd, POLLIN, deadline)) return ReadResult::timeout;
    if (!pump(fd, buf)) {
      if (auto f = buf.next()) {  // the peer's last words before it closed
        out = std::move(*f);
        return ReadResult::frame;
      }
      return ReadResult::closed;
    }
  }
}

std::string hello_payload(int rank, int world_size) {
  return PayloadWriter().u32(kMagic).u32(uint32_t(rank)).u32(uint32_t(world_size)).take();
}

std::string gathered_payload(const std::vector<std::string>& parts) {
  PayloadWriter w;
  w.u32(uint32_t(parts.size()));
  for (const auto& p : parts) w.str(p);
  return w.take();
}

std::vector<std::string> parse_gathered(std::string_view payload) {
  PayloadReader r(payload);
  const uint32_t n = r.u32();
  if (n > payload.size()) fail("coordinator: a GATHERED message claims ", n, " parts");
  std::vector<std::string> parts;
  parts.reserve(n);
  for (uint32_t i = 0; i < n; ++i) parts.push_back(r.str());
  return parts;
}

}  // namespace biofm::coord
