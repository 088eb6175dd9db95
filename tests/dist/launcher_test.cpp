// biofm launch: option parsing, ranks set for each process, a failing rank stops the run.
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

TEST(Launcher, ParsesOptionsAndTheCommand) {
  std::vector<std::string> cmd;
  LaunchOptions o = parse_launch_args({"--nproc-per-node", "4", "--nnodes", "2", "--node-rank", "1", "--master",
                                       "10.0.0.1:6000", "train", "--config-name", "x", "seed=3"},
                                      cmd);
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 6000);
  EXPECT_EQ(cmd, (std::vector<std::string>{"train", "--config-name", "x", "seed=3"}));
  EXPECT_THROW(parse_launch_args({"--nproc-per-node", "0", "info"}, cmd), Error);
  EXPECT_THROW(parse_launch_args({"--nproc-per-node", "2"}, cmd), Error);
  EXPECT_THROW(parse_launch_args({"--nnodes", "2", "--node-rank", "2", "info"}, cmd), Error);
  EXPECT_THROW(parse_launch_args({"--bogus", "info"}, cmd), Error);
}

TEST(Launcher, EachProcessSeesItsRank) {
  CliRun r = run("launch --nproc-per-node 3 --master 127.0.0.1:" + std::to_string(biofm::testkit::free_port()) + " info");
  EXPECT_EQ(r.code, 0) << r.out;
  for (int k = 0; k < 3; ++k)
    EXPECT_NE(r.out.find("rank " + std::to_string(k) + " of 3, local rank " + std::to_string(k) + " of 3"),
              std::string::npos)
        << r.out;
}

TEST(Launcher, AFailingRankStopsTheRunAndIsNamed) {
  CliRun r = run("launch --nproc-per-node 2 --grace-seconds 5 eval --model /nonexistent/model --input x.fasta");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("exited with code 1"), std::string::npos) << r.out;
}
