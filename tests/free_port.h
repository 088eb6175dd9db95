// A TCP port on 127.0.0.1 that nothing listens on right now, chosen by the kernel (bind to port
// 0), for tests that start a rendezvous: ports derived from pids collide between test processes
// running in parallel.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace biofm::testkit {

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

}  // namespace biofm::testkit
