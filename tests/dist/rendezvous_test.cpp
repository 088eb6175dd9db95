// The TCP rendezvous: every rank gets rank 0's payload; a rank that never arrives is named.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/dist/rendezvous.h"

using namespace biofm;

namespace {

// A port per test run, so that parallel test processes do not collide.
int test_port(int offset) { return 30000 + (int(::getpid()) * 7 + offset) % 20000; }

DistEnv rank_env(int rank, int world, int port) {
  DistEnv e;
  e.rank = rank;
  e.world_size = world;
  e.master_port = port;
  e.source = "test";
  return e;
}

}  // namespace

TEST(Rendezvous, EveryRankGetsRankZerosPayload) {
  const int world = 4, port = test_port(1);
  const std::string id(128, '\0');
  std::string payload = id;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = char(i * 7);
  std::vector<std::string> got(world);
  std::vector<std::thread> ranks;
  for (int r = world - 1; r >= 0; --r)  // the others start before rank 0 listens: they retry
    ranks.emplace_back([&, r] { got[size_t(r)] = rendezvous(rank_env(r, world, port), r == 0 ? payload : "", std::chrono::seconds(20)); });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(got[size_t(r)], payload) << "rank " << r;
}

TEST(Rendezvous, AMissingRankIsNamedWhenTheTimeoutExpires) {
  const int world = 3, port = test_port(2);
  std::string error0, error1;
  std::thread r1([&] {
    try {
      rendezvous(rank_env(1, world, port), "", std::chrono::milliseconds(1500));
    } catch (const Error& e) {
      error1 = e.what();
    }
  });
  try {
    rendezvous(rank_env(0, world, port), "id", std::chrono::milliseconds(1000));
  } catch (const Error& e) {
    error0 = e.what();
  }
  r1.join();
  EXPECT_NE(error0.find("rank(s) 2 of 3 never arrived"), std::string::npos) << error0;
  EXPECT_FALSE(error1.empty()) << "rank 1 must fail too once rank 0 gives up";
}

TEST(Rendezvous, SingleProcessNeedsNoNetwork) {
  EXPECT_EQ(rendezvous(DistEnv{}, "abc", std::chrono::milliseconds(1)), "abc");
}

// A connection that never says hello (a port scanner, a hung process) must not hold up the
// real ranks behind it for the whole timeout.
TEST(Rendezvous, ASilentConnectionDoesNotBlockTheRealRanks) {
  const int world = 2, port = test_port(3);
  std::string got0, got1;
  std::thread r0([&] { got0 = rendezvous(rank_env(0, world, port), "payload", std::chrono::seconds(30)); });
  // The silent peer connects first (retrying until rank 0 listens) and then says nothing.
  int silent = -1;
  for (int tries = 0; tries < 100 && silent < 0; ++tries) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      silent = fd;
    } else {
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_GE(silent, 0);
  const auto t0 = std::chrono::steady_clock::now();
  got1 = rendezvous(rank_env(1, world, port), "", std::chrono::seconds(30));
  r0.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(silent);
  EXPECT_EQ(got0, "payload");
  EXPECT_EQ(got1, "payload");
  EXPECT_LT(s, 10.0) << "the silent connection held the rendezvous up";
}
