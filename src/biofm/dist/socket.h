// TCP plumbing for the coordinator: an owned file descriptor, waits bounded by deadlines,
// whole reads and writes, a listening socket and a bounded connect, and a self-pipe that
// wakes a thread blocked in poll().
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <utility>

namespace biofm::net {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it when destroyed or reset.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_;
};

// Milliseconds until the deadline, 0 once passed (poll()'s timeout argument).
int ms_left(Clock::time_point deadline);

// Waits until fd is readable (events = POLLIN) or writable (POLLOUT); false at the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline);

// Exactly n bytes, or false (the peer closed, an error, or the deadline).
bool read_all(int fd, void* buf, size_t n, Clock::time_point deadline);
// All n bytes, or false (the peer is gone, or it stopped reading until the deadline).
bool write_all(int fd, const void* buf, size_t n, Clock::time_point deadline);

// Whatever is available now (never blocks): > 0 bytes read, 0 the peer closed, -1 nothing
// available yet, -2 an error (the connection is unusable).
long read_some(int fd, void* buf, size_t n);

// A non-blocking socket listening on every interface at port; throws naming the port when
// it is taken.
Fd listen_on(int port, int backlog);
// The next pending connection of a listening socket (invalid when there is none).
Fd accept_from(int listener);
// One connect() to host:port bounded by the deadline; invalid on failure with errno set (a
// refused connection fails at once: rank 0 may not listen yet, the caller retries).
Fd connect_to(const std::string& host, int port, Clock::time_point deadline);

std::string where(const std::string& host, int port);  // "host:port"

// A pipe whose write end wakes a poll() on its read end, so a background thread blocked in
// poll() notices a stop request or new work at once.
class WakePipe {
 public:
  WakePipe();
  int read_fd() const { return read_.get(); }
  void wake();   // any thread; never blocks
  void drain();  // the polling thread, after its read end became readable

 private:
  Fd read_, write_;
};

}  // namespace biofm::net
