// The TCP rendezvous: every rank gets rank 0's payload; a rank that never arrives is named.
#include <gtest/gtest.h>

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
