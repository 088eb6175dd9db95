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
