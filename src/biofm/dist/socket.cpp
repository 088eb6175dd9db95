#include "biofm/dist/socket.h"

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
#include <memory>

#include "biofm/core/error.h"

namespace biofm::net {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int ms_left(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return int(std::clamp<int64_t>(ms, 0, 1 << 30));
}

bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) fail("poll failed: ", std::strerror(errno));
  }
}

bool read_all(int fd, void* buf, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    const long r = read_some(fd, p, n);
    if (r == 0 || r == -2) return false;
    if (r < 0) continue;
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    // MSG_DONTWAIT: a peer that stopped reading cannot hold us past the deadline.
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(fd, POLLOUT, deadline)) continue;
      return false;
    }
    p += r;
    n -= size_t(r);
  }
  return true;
}

long read_some(int fd, void* buf, size_t n) {
  for (;;) {
    const ssize_t r = ::recv(fd, buf, n, MSG_DONTWAIT);
    if (r >= 0) return long(r);
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
  }
}

namespace {

struct AddrInfoFree {
  void operator()(addrinfo* a) const { ::freeaddrinfo(a); }
};
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoFree>;

AddrInfo resolve(const char* host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (host == nullptr) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host, service.c_str(), &hints, &res);
  if (rc != 0) fail("cannot resolve '", host ? host : "*", "': ", ::gai_strerror(rc));
  return AddrInfo(res);
}

// Small control messages must not wait for Nagle's algorithm (tens of ms per round trip).
void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

Fd listen_on(int port, int backlog) {
  const AddrInfo ai = resolve(nullptr, port);
  // CLOEXEC throughout: a child process holding our sockets would hide this process's exit.
  // Non-blocking: accept_from() returns at once when no connection is pending.
  Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
  if (!s.valid()) fail("socket() failed: ", std::strerror(errno));
  const int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(s.get(), backlog) != 0)
    fail("cannot listen on port ", port, ": ", std::strerror(errno), " (another run on this port? set MASTER_PORT)");
  return s;
}

Fd accept_from(int listener) {
  // Blocking like every other connection here (they are used with poll() and MSG_DONTWAIT).
  Fd c(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (c.valid()) set_nodelay(c.get());
  return c;
}

Fd connect_to(const std::string& host, int port, Clock::time_point deadline) {
  const AddrInfo ai = resolve(host.c_str(), port);
  Fd c(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
  if (!c.valid()) return c;
  // Non-blocking connect bounded by the deadline: a blocking connect to an address that drops
  // packets would wait for the kernel's own, much longer, timeout.
  const int flags = ::fcntl(c.get(), F_GETFL, 0);
  ::fcntl(c.get(), F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(c.get(), ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    if (!wait_for(c.get(), POLLOUT, deadline)) {
      errno = ETIMEDOUT;
      return Fd();
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(c.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    rc = err == 0 ? 0 : -1;
    errno = err;
  }
  if (rc != 0) {
    const int saved = errno;
    c.reset();
    errno = saved;
    return c;
  }
  ::fcntl(c.get(), F_SETFL, flags);
  set_nodelay(c.get());
  return c;
}

std::string where(const std::string& host, int port) { return host + ":" + std::to_string(port); }

WakePipe::WakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) fail("pipe2 failed: ", std::strerror(errno));
  read_ = Fd(fds[0]);
  write_ = Fd(fds[1]);
}

void WakePipe::wake() {
  const char byte = 1;
  // A full pipe already wakes the reader: EAGAIN is fine.
  [[maybe_unused]] const ssize_t r = ::write(write_.get(), &byte, 1);
}

void WakePipe::drain() {
  char buf[64];
  while (::read(read_.get(), buf, sizeof buf) > 0) {
  }
}

}  // namespace biofm::net
