#include "biofm/dist/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "biofm/core/error.h"

namespace biofm {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMagic = 0x62696f66;  // "biof": a stray connection is told apart

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

int ms_left(Clock::time_point deadline) {
  return int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
}

// Waits until fd is readable (or writable); false at the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) fail("rendezvous: poll failed: ", std::strerror(errno));
  }
}

// Exactly n bytes, or false (peer closed or deadline).
bool read_all(int fd, void* buf, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= size_t(r);
  }
  return true;
}

addrinfo* resolve(const DistEnv& e, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(e.master_port);
  const int rc = ::getaddrinfo(passive ? nullptr : e.master_addr.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) fail("rendezvous: cannot resolve MASTER_ADDR '", e.master_addr, "': ", ::gai_strerror(rc));
  return res;
}

std::string where(const DistEnv& e) { return e.master_addr + ":" + std::to_string(e.master_port); }

std::string serve(const DistEnv& e, const std::string& payload, Clock::time_point deadline) {
  addrinfo* ai = resolve(e, true);
  Fd server(::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol));
  const int one = 1;
  ::setsockopt(server.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const int bound = ::bind(server.get(), ai->ai_addr, ai->ai_addrlen);
  ::freeaddrinfo(ai);
  if (bound != 0 || ::listen(server.get(), e.world_size) != 0)
    fail("rendezvous: rank 0 cannot listen on port ", e.master_port, ": ", std::strerror(errno),
         " (another run on this port? set MASTER_PORT)");
  std::vector<Fd> peers(size_t(e.world_size));
  int arrived = 1;
  while (arrived < e.world_size) {
    if (!wait_for(server.get(), POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < e.world_size; ++r)
        if (peers[size_t(r)].get() < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail("rendezvous at ", where(e), ": rank(s) ", missing, " of ", e.world_size, " never arrived");
    }
    Fd c(::accept(server.get(), nullptr, nullptr));
    if (c.get() < 0) continue;
    uint32_t hello[3];  // magic, rank, world size
    // A connection that says nothing (a port scanner, a hung process) gets a few seconds, not
    // the whole timeout: the real ranks wait behind it.
    const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    if (!read_all(c.get(), hello, sizeof hello, hello_deadline) || hello[0] != kMagic) continue;  // not one of ours
    const int r = int(hello[1]);
    if (int(hello[2]) != e.world_size)
      fail("rendezvous at ", where(e), ": rank ", r, " was started with world size ", hello[2], ", rank 0 with ",
           e.world_size);
    if (r <= 0 || r >= e.world_size || peers[size_t(r)].get() >= 0)
      fail("rendezvous at ", where(e), ": a second process claims rank ", r);
    peers[size_t(r)] = std::move(c);
    ++arrived;
  }
  const uint64_t n = payload.size();
  for (int r = 1; r < e.world_size; ++r) {
    const int fd = peers[size_t(r)].get();
    if (!write_all(fd, &n, sizeof n) || !write_all(fd, payload.data(), payload.size()))
      fail("rendezvous at ", where(e), ": rank ", r, " went away before receiving the payload");
  }
  return payload;
}

// connect() bounded by the deadline (a blocking connect to an address that drops packets
// would wait for the kernel's own, much longer, timeout).
bool connect_by(int fd, const addrinfo* ai, Clock::time_point deadline) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    if (!wait_for(fd, POLLOUT, deadline)) return false;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    errno = err;
    rc = err == 0 ? 0 : -1;
  }
  ::fcntl(fd, F_SETFL, flags);
  return rc == 0;
}

std::string join(const DistEnv& e, Clock::time_point deadline) {
  // Rank 0 may not listen yet: retry until the deadline.
  for (;;) {
    addrinfo* ai = resolve(e, false);
    Fd c(::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol));
    const bool connected = connect_by(c.get(), ai, deadline);
    ::freeaddrinfo(ai);
    if (connected) {
      const uint32_t hello[3] = {kMagic, uint32_t(e.rank), uint32_t(e.world_size)};
      uint64_t n = 0;
      if (!write_all(c.get(), hello, sizeof hello) || !read_all(c.get(), &n, sizeof n, deadline))
        fail("rendezvous: rank ", e.rank, " reached rank 0 at ", where(e),
             " but got no payload in time (another rank never arrived?)");
      if (n >= (1u << 20)) fail("rendezvous: rank 0 at ", where(e), " sent a payload of ", n, " bytes (at most 1 MiB)");
      std::string payload(size_t(n), '\0');
      if (!read_all(c.get(), payload.data(), payload.size(), deadline))
        fail("rendezvous: rank ", e.rank, ": rank 0 at ", where(e), " went away while sending the payload");
      return payload;
    }
    if (ms_left(deadline) == 0)
      fail("rendezvous: rank ", e.rank, " could not reach rank 0 at ", where(e), ": ", std::strerror(errno));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
  }
}

}  // namespace

std::string rendezvous(const DistEnv& env, const std::string& payload, std::chrono::milliseconds timeout) {
  if (!env.distributed()) return payload;
  const auto deadline = Clock::now() + timeout;
  return env.rank == 0 ? serve(env, payload, deadline) : join(env, deadline);
}

}  // namespace biofm
