// biofm launch: ranks set for each process, a failing rank stops the run (its flags:
// tests/cli/launch_flags_test.cpp).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "free_port.h"
#include "biofm/core/error.h"
#include "biofm/dist/launcher.h"
#include "e2e/cli_run.h"

using namespace biofm;

namespace {

struct CliRun {
  int code;
  std::string out;
};

CliRun run(const std::string& args) {
  testkit::RunResult r = testkit::run_biofm(args);
  return {r.code, r.output};
}

}  // namespace

TEST(Launcher, EachProcessSeesItsRank) {
  CliRun r = run("launch --nproc-per-node 3 --master 127.0.0.1:" + std::to_string(biofm::testkit::free_port()) + " info");
  EXPECT_EQ(r.code, 0) << r.out;
  for (int k = 0; k < 3; ++k)
    EXPECT_NE(r.out.find("rank " + std::to_string(k) + " of 3, local rank " + std::to_string(k) + " of 3"),
              std::string::npos)
        << r.out;
}

TEST(Launcher, AFailingRankStopsTheRunAndIsNamed) {
  CliRun r = run("launch --nproc-per-node 2 --grace-seconds 5 embed --model /nonexistent/model --input x.fasta --output /nonexistent/out");
  EXPECT_EQ(r.code, 1) << r.out;
  // The first rank to exit need not be the cause (rank 0 exits 1 when another rank froze): said so.
  EXPECT_NE(r.out.find("exited with code 1, the first to end (its error above names the cause, which may be another rank)"),
            std::string::npos) << r.out;
}

// A rank killed by a signal closes its connections before the kernel reports it ended, so the
// rank that notices (rank 0 exits 1) can end first; the launcher names the killed rank, the
// cause, and exits with its code. Here rank 0 exits 1 at once and rank 1 is killed 0.3 s later.
TEST(Launcher, ARankKilledJustAfterAnotherFailedIsNamedAsTheCause) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.grace_seconds = 5;
  testing::internal::CaptureStderr();
  const int code = launch_local(o, "/bin/sh", {"-c", "if [ \"$RANK\" = 1 ]; then sleep 0.3; kill -9 $$; fi; exit 1"});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 128 + 9) << err;
  EXPECT_NE(err.find("launch: rank 1 was killed by signal 9"), std::string::npos) << err;
  EXPECT_EQ(err.find("rank 0 exited"), std::string::npos) << err;
}
