// The coordinator: ranks are threads of this process, each with its own Coordinator talking
// TCP to rank 0 on a port of its own per test.
#include "biofm/dist/coordinator.h"
#include "free_port.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/dist/coordinator_protocol.h"

using namespace biofm;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// A port per test process, so that parallel test processes do not collide.
// (offset: kept so each call site reads as before; every call gets a fresh free port)
int test_port(int /*offset*/) { return biofm::testkit::free_port(); }

DistEnv rank_env(int rank, int world, int port) {
  DistEnv e;
  e.rank = rank;
  e.world_size = world;
  e.master_port = port;
  e.source = "test";
  return e;
}

// Quick heartbeats, generous timeouts: nothing here should fail by accident on a busy machine.
CoordinatorOptions test_options() {
  CoordinatorOptions o;
  o.connect_timeout = 10s;
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = 10s;
  o.step_timeout = 60s;
  return o;
}

// What one rank's failure handler was told.
class FailureLog {
 public:
  Coordinator::FailureHandler handler() {
    return [this](const std::string& message) {
      {
        std::lock_guard lock(m_);
        messages_.push_back(message);
      }
      cv_.notify_all();
    };
  }
  // The first message, waiting up to timeout for it ("" when none came).
  std::string wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(m_);
    cv_.wait_for(lock, timeout, [&] { return !messages_.empty(); });
    return messages_.empty() ? "" : messages_.front();
  }
  std::vector<std::string> messages() {
    std::lock_guard lock(m_);
    return messages_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> messages_;
};

// Thrown by a test's rank to end it as a failing process would (its Coordinator is destroyed
// while the exception unwinds).
struct RankDies {};

// Runs body(coordinator) for the given ranks of a world, one thread each (the last rank
// first: the others retry until rank 0 listens). An exception escaping a body fails the test.
template <class Body>
void run_ranks(const std::vector<int>& ranks, int world, int port, const CoordinatorOptions& o,
               std::vector<FailureLog>& logs, Body body) {
  std::vector<std::thread> threads;
  for (auto it = ranks.rbegin(); it != ranks.rend(); ++it)
    threads.emplace_back([&, r = *it] {
      try {
        Coordinator c(rank_env(r, world, port), o, logs[size_t(r)].handler());
        body(c);
      } catch (const RankDies&) {  // the test meant it
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

std::vector<int> ranks_below(int n) {
  std::vector<int> out;
  for (int r = 0; r < n; ++r) out.push_back(r);
  return out;
}

template <class Body>
void run_ranks(int world, int port, const CoordinatorOptions& o, std::vector<FailureLog>& logs, Body body) {
  run_ranks(ranks_below(world), world, port, o, logs, body);
}

// The calls of a rank whose run failed throw the failure: returns its message.
template <class Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A raw TCP connection to rank 0 (retried until it listens): a stray client, or a rank that
// speaks the protocol by hand.
int raw_connect(int port) {
  for (int tries = 0; tries < 200; ++tries) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

void raw_send(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
}

}  // namespace

TEST(Coordinator, AllGatherMatchesCallsOfDifferentSizes) {
  const int world = 4, rounds = 40;
  std::vector<FailureLog> logs(world);
  auto payload = [](int rank, int round) {  // empty, short and 64 KiB-long ones
    if ((rank + round) % 7 == 0) return std::string();
    const size_t n = (rank == 2 && round % 10 == 3) ? 65536 : size_t(rank * 13 + round);
    return std::string(n, char('a' + rank)) + "#" + std::to_string(round);
  };
  run_ranks(world, test_port(1), test_options(), logs, [&](Coordinator& c) {
    for (int i = 0; i < rounds; ++i) {
      const auto all = c.all_gather(payload(c.rank(), i));
      ASSERT_EQ(all.size(), size_t(world));
      for (int r = 0; r < world; ++r) ASSERT_EQ(all[size_t(r)], payload(r, i)) << "round " << i << ", rank " << r;
    }
    c.finish();
  });
  for (auto& log : logs) EXPECT_TRUE(log.messages().empty());
}

TEST(Coordinator, AnyAndSumCombineEveryRank) {
  const int world = 3;
  std::vector<FailureLog> logs(world);
  run_ranks(world, test_port(2), test_options(), logs, [&](Coordinator& c) {
    EXPECT_TRUE(c.any(c.rank() == 2));
    EXPECT_FALSE(c.any(false));
    EXPECT_TRUE(c.any(true));
    const auto total = c.sum({double(c.rank()), 1.0, 0.5 * c.rank()});
    EXPECT_EQ(total, (std::vector<double>{3.0, 3.0, 1.5}));
    EXPECT_TRUE(c.sum({}).empty());
  });
}

TEST(Coordinator, StoreSetOnOneRankIsSeenByTheOthers) {
  const int world = 3;
  std::vector<FailureLog> logs(world);
  run_ranks(world, test_port(3), test_options(), logs, [&](Coordinator& c) {
    if (c.rank() == 1) {
      std::this_thread::sleep_for(200ms);  // the others ask before it is set: they wait
      c.set("nccl_id", std::string("\0\1\2id", 5));
    }
    if (c.rank() == 0) c.set("from rank 0", "zero");
    EXPECT_EQ(c.get("nccl_id", 10s), std::string("\0\1\2id", 5));
    EXPECT_EQ(c.get("from rank 0", 10s), "zero");
    c.all_gather("");  // everyone has read it before it changes
    if (c.rank() == 2) c.set("nccl_id", "new");
    c.all_gather("");
    EXPECT_EQ(c.get("nccl_id", 10s), "new");
    try {
      c.get("never set", 200ms);
      ADD_FAILURE() << "get of a key nobody set returned";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "'never set'")) << e.what();
    }
  });
  for (auto& log : logs) EXPECT_TRUE(log.messages().empty());
}

TEST(Coordinator, SingleProcessNeedsNoNetwork) {
  Coordinator c(DistEnv{}, test_options(), [](const std::string& m) { ADD_FAILURE() << m; });
  EXPECT_EQ(c.world_size(), 1);
  c.set("k", "v");
  EXPECT_EQ(c.get("k", 1ms), "v");
  EXPECT_THROW(c.get("missing", 1ms), Error);
  EXPECT_EQ(c.all_gather("mine"), std::vector<std::string>{"mine"});
  EXPECT_TRUE(c.any(true));
  EXPECT_EQ(c.sum({1.5, 2.0}), (std::vector<double>{1.5, 2.0}));
  c.set_step(3);
  c.finish();
  EXPECT_THROW(c.all_gather("after"), Error);
}

TEST(Coordinator, AMissingRankIsNamedAtTheConnectTimeout) {
  const int world = 3, port = test_port(4);
  std::string error0, error1;
  std::thread r1([&] {
    auto o = test_options();
    o.connect_timeout = 3s;
    try {
      Coordinator c(rank_env(1, world, port), o);
    } catch (const Error& e) {
      error1 = e.what();
    }
  });
  auto o = test_options();
  o.connect_timeout = 1s;
  try {
    Coordinator c(rank_env(0, world, port), o);
  } catch (const Error& e) {
    error0 = e.what();
  }
  r1.join();
  EXPECT_TRUE(contains(error0, "rank(s) 2 of 3 never arrived")) << error0;
  EXPECT_TRUE(contains(error1, "rank(s) 2 of 3 never arrived")) << "rank 0 tells rank 1 why: " << error1;
}

TEST(Coordinator, AWrongWorldSizeIsNamed) {
  const int port = test_port(5);
  std::string error0, error1;
  std::thread r1([&] {
    try {
      Coordinator c(rank_env(1, 3, port), test_options());
    } catch (const Error& e) {
      error1 = e.what();
    }
  });
  try {
    Coordinator c(rank_env(0, 2, port), test_options());
  } catch (const Error& e) {
    error0 = e.what();
  }
  r1.join();
  EXPECT_TRUE(contains(error0, "rank 1 was started with world size 3, rank 0 with 2")) << error0;
  EXPECT_EQ(error1, error0);
}

// Connections that never say hello, or say something else, must not hold up the real ranks.
TEST(Coordinator, StrayConnectionsAreIgnored) {
  const int world = 2, port = test_port(6);
  std::vector<FailureLog> logs(world);
  std::thread rank0([&] {
    run_ranks({0}, world, port, test_options(), logs, [&](Coordinator& c) {
      EXPECT_EQ(c.all_gather("0"), (std::vector<std::string>{"0", "1"}));
    });
  });
  // The strays connect first (retrying until rank 0 listens).
  const int silent = raw_connect(port);
  const int talker = raw_connect(port);
  EXPECT_GE(silent, 0);
  EXPECT_GE(talker, 0);
  raw_send(talker, "GET / HTTP/1.0\r\n\r\n");
  const auto t0 = Clock::now();
  run_ranks({1}, world, port, test_options(), logs, [&](Coordinator& c) {
    EXPECT_EQ(c.all_gather("1"), (std::vector<std::string>{"0", "1"}));
  });
  rank0.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0) << "a stray connection held them up";
  ::close(silent);
  ::close(talker);
  for (auto& log : logs) EXPECT_TRUE(log.messages().empty());
}

// A process that dies closes its connection without a goodbye: every other rank is told.
TEST(Coordinator, ARankWhoseProcessEndsIsNamed) {
  const int world = 3, port = test_port(7);
  std::vector<FailureLog> logs(world);
  std::thread rank2([&] {  // rank 2 speaks the protocol by hand, then its "process" ends
    const int fd = raw_connect(port);
    ASSERT_GE(fd, 0);
    raw_send(fd, coord::encode(coord::Msg::hello, coord::hello_payload(2, world)));
    char welcome[5];
    EXPECT_EQ(::recv(fd, welcome, sizeof welcome, MSG_WAITALL), 5);
    std::this_thread::sleep_for(200ms);
    ::close(fd);
  });
  run_ranks({0, 1}, world, port, test_options(), logs, [&](Coordinator& c) {
    const auto t0 = Clock::now();
    const std::string error = error_of([&] { c.all_gather("waits for rank 2"); });
    EXPECT_TRUE(contains(error, "rank 2 exited (its connection to rank 0 closed)")) << error;
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
    EXPECT_EQ(logs[size_t(c.rank())].wait(0ms), error);
  });
  rank2.join();
}

// A rank whose Coordinator is destroyed by an exception says no goodbye: the others learn it
// failed instead of waiting for it.
TEST(Coordinator, ARankThatThrowsIsNamed) {
  const int world = 3;
  std::vector<FailureLog> logs(world);
  run_ranks(world, test_port(8), test_options(), logs, [&](Coordinator& c) {
    if (c.rank() == 1) throw RankDies();
    const std::string error = error_of([&] { c.all_gather("waits for rank 1"); });
    EXPECT_TRUE(contains(error, "rank 1 exited")) << error;
  });
}

TEST(Coordinator, ARankWithoutHeartbeatsIsNamed) {
  const int world = 3;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.heartbeat_timeout = 500ms;
  run_ranks(world, test_port(9), o, logs, [&](Coordinator& c) {
    if (c.rank() == 2) c.pause_heartbeats_for_test();
    const std::string message = logs[size_t(c.rank())].wait(5s);
    EXPECT_TRUE(contains(message, "rank 2 stopped responding (no heartbeat for ")) << message;
  });
}

TEST(Coordinator, RankZeroWithoutHeartbeatsIsNamed) {
  const int world = 2;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.heartbeat_timeout = 500ms;
  run_ranks(world, test_port(10), o, logs, [&](Coordinator& c) {
    if (c.rank() == 0) {
      c.pause_heartbeats_for_test();
      logs[0].wait(5s);  // rank 1 gives up and goes away
      return;
    }
    const std::string message = logs[1].wait(5s);
    EXPECT_TRUE(contains(message, "rank 0 stopped responding")) << message;
  });
}

TEST(Coordinator, RankZeroExitingIsNamed) {
  const int world = 2;
  std::vector<FailureLog> logs(world);
  run_ranks(world, test_port(11), test_options(), logs, [&](Coordinator& c) {
    if (c.rank() == 0) throw RankDies();
    const std::string error = error_of([&] { c.all_gather("waits for rank 0"); });
    EXPECT_TRUE(contains(error, "rank 0 exited")) << error;
  });
}

TEST(Coordinator, ARankStuckInOneStepIsNamedWithTheOthersSteps) {
  const int world = 3;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.step_timeout = 1s;
  run_ranks(world, test_port(12), o, logs, [&](Coordinator& c) {
    c.all_gather("");  // start together
    c.set_step(5);
    if (c.rank() != 1) {
      std::this_thread::sleep_for(100ms);
      c.set_step(6);
    }
    const std::string message = logs[size_t(c.rank())].wait(5s);
    EXPECT_TRUE(contains(message, "rank 1 has been in step 5 for 1.")) << message;
    EXPECT_TRUE(contains(message, "ranks 0, 2 last reported step 6")) << message;
  });
}

TEST(Coordinator, ARankStuckInItsSetupIsNamed) {
  // The trainer marks the setup before step 1 as (0, Io): a rank that never leaves it is named
  // after io_timeout while the others have reached step 1.
  const int world = 2;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.io_timeout = 500ms;
  o.first_step_timeout = 30s;
  run_ranks(world, test_port(18), o, logs, [&](Coordinator& c) {
    c.set_step(0, Coordinator::Phase::Io);
    if (c.rank() == 0) c.set_step(1);
    const std::string message = logs[size_t(c.rank())].wait(5s);
    EXPECT_TRUE(contains(message, "rank 1 has been in its setup (before step 1) for 0.")) << message;
    EXPECT_TRUE(contains(message, "(io timeout 0.5 s)")) << message;
  });
}

TEST(Coordinator, TheAdaptiveStepLimitFollowsRecentStepsWithAFloor) {
  // No fixed step_timeout: after quick steps the limit is the floor (min_step_timeout), far
  // below the first-step allowance; a rank stuck past it is named.
  const int world = 2;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.step_timeout = 0s;
  o.min_step_timeout = 400ms;
  o.first_step_timeout = 30s;
  run_ranks(world, test_port(16), o, logs, [&](Coordinator& c) {
    for (int step = 1; step <= 3; ++step) {
      c.set_step(step);
      c.any(false);
    }
    c.set_step(4);
    if (c.rank() == 0) {  // (well after rank 1 entered step 4, so rank 1 is over its limit first)
      std::this_thread::sleep_for(60ms);  // (5 x 60 ms stays below the 400 ms floor)
      c.set_step(5);
    }
    const std::string message = logs[size_t(c.rank())].wait(5s);
    EXPECT_TRUE(contains(message, "rank 1 has been in step 4 for 0.")) << message;
    EXPECT_TRUE(contains(message, "(step timeout 0.4 s)")) << message;
  });
}

TEST(Coordinator, ValidationAndCheckpointsHaveTheirOwnLimit) {
  // A phase marked Io may outlast the step limit (here 300 ms) up to io_timeout.
  const int world = 2;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.step_timeout = 300ms;
  o.io_timeout = 20s;
  run_ranks(world, test_port(17), o, logs, [&](Coordinator& c) {
    c.set_step(1);
    c.any(false);
    c.set_step(1, Coordinator::Phase::Io);
    std::this_thread::sleep_for(900ms);
    c.set_step(2);
    c.any(false);
    c.finish();
  });
  for (auto& log : logs) EXPECT_TRUE(log.messages().empty()) << log.messages().front();
}

TEST(Coordinator, ACleanFinishIsNoFailure) {
  const int world = 3;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.heartbeat_interval = 20ms;
  o.heartbeat_timeout = 2s;
  run_ranks(world, test_port(13), o, logs, [&](Coordinator& c) {
    for (int step = 0; step < 5; ++step) {
      c.set_step(step);
      c.any(false);
    }
    // Ranks finish at different times (rank 0 last): the early ones wait, nobody fails.
    std::this_thread::sleep_for(std::chrono::milliseconds(c.rank() == 0 ? 300 : 100 * c.rank()));
    c.finish();
    EXPECT_THROW(c.all_gather("after finish"), Error);
  });
  for (auto& log : logs) EXPECT_TRUE(log.messages().empty()) << log.messages().front();
}

TEST(Coordinator, RankZeroNamesTheRanksThatDidNotFinish) {
  const int world = 2;
  std::vector<FailureLog> logs(world);
  auto o = test_options();
  o.heartbeat_timeout = 500ms;
  run_ranks(world, test_port(14), o, logs, [&](Coordinator& c) {
    if (c.rank() == 0) {
      const std::string error = error_of([&] { c.finish(); });
      EXPECT_TRUE(contains(error, "rank(s) 1 did not finish within 0.5 s of rank 0")) << error;
    } else {
      const std::string message = logs[1].wait(5s);
      EXPECT_TRUE(contains(message, "rank(s) 1 did not finish")) << message;
    }
  });
}

TEST(Coordinator, ARankThatFinishesWhileOthersGatherIsNamed) {
  const int world = 2;
  std::vector<FailureLog> logs(world);
  run_ranks(world, test_port(15), test_options(), logs, [&](Coordinator& c) {
    if (c.rank() == 1) return c.finish();
    const std::string error = error_of([&] { c.all_gather("never matched"); });
    EXPECT_TRUE(contains(error, "rank 1 finished while rank(s) 0 wait for it in all-gather #1")) << error;
  });
}
