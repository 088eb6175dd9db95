// biofm launch's flags (cli/launch_flags.h): options up to the command, the command's own flags
// passed on untouched, usage errors for what cannot run.
#include "biofm/cli/launch_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace biofm;

namespace {

// parse_launch_flags over {"biofm", "launch", args...}.
LaunchOptions parse(std::vector<std::string> args, std::vector<std::string>& command) {
  args.insert(args.begin(), {"biofm", "launch"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_launch_flags(int(argv.size()), argv.data(), command);
}

}  // namespace

TEST(LaunchFlags, OptionsThenTheCommandWithItsOwnFlags) {
  std::vector<std::string> cmd;
  LaunchOptions o = parse({"--nproc-per-node", "4", "--nnodes", "2", "--node-rank", "1", "--master", "10.0.0.1:6000",
                           "train", "--config-name", "x", "seed=3", "--help"},
                          cmd);
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 6000);
  EXPECT_EQ(cmd, (std::vector<std::string>{"train", "--config-name", "x", "seed=3", "--help"}));
  // torchrun's spellings, "--" before the command, defaults.
  o = parse({"--nproc_per_node=2", "--grace-seconds", "5", "--", "--odd-command"}, cmd);
  EXPECT_EQ(o.nproc_per_node, 2);
  EXPECT_EQ(o.grace_seconds, 5);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_EQ(cmd, (std::vector<std::string>{"--odd-command"}));
  // torchrun's rendezvous flags, as the recipes' multi-node commands write them.
  o = parse({"--nnodes=2", "--node_rank=0", "--nproc_per_node=8", "--master_addr=10.1.2.3", "--master_port=29400",
             "train", "--config-name", "og2_7b"},
            cmd);
  EXPECT_EQ(o.master_addr, "10.1.2.3");
  EXPECT_EQ(o.master_port, 29400);
  EXPECT_EQ(o.nproc_per_node, 8);
  o = parse({"--standalone", "--nproc_per_node", "2", "info"}, cmd);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  // --help before the command: no command, nothing to start.
  parse({"--help"}, cmd);
  EXPECT_TRUE(cmd.empty());
}

TEST(LaunchFlags, WhatCannotRunIsAUsageError) {
  std::vector<std::string> cmd;
  EXPECT_THROW(parse({"--nproc-per-node", "2"}, cmd), UsageError);                  // no command
  EXPECT_THROW(parse({"--nnodes", "2", "--node-rank", "2", "info"}, cmd), UsageError);
  EXPECT_THROW(parse({"--bogus", "info"}, cmd), UsageError);
  EXPECT_THROW(parse({"--master", "host", "info"}, cmd), UsageError);
  EXPECT_THROW(parse({"--master", "host:99999", "info"}, cmd), UsageError);
  EXPECT_THROW(parse({"--master", "host:", "info"}, cmd), UsageError);
  EXPECT_THROW(parse({"--nproc-per-node", "0", "info"}, cmd), UsageError);          // out of range
  EXPECT_THROW(parse({"--nproc-per-node", "two", "info"}, cmd), UsageError);
  EXPECT_THROW(parse({"--master", "a:1", "--master_port", "2", "info"}, cmd), UsageError);  // both forms
  EXPECT_THROW(parse({"--master_port", "0", "info"}, cmd), UsageError);
  EXPECT_THROW(parse({"--standalone", "--nnodes", "2", "info"}, cmd), UsageError);
}

// --help lists the torchrun spellings the parser accepts (they were parsed but hidden), from the
// one flag table that parses them.
TEST(LaunchFlags, HelpListsTorchrunsSpellings) {
  const std::string help = help_text(kLaunchSpec);
  for (const char* f : {"--nproc_per_node N", "--nnodes M", "--node_rank R", "--master_addr ADDR", "--master_port PORT",
                        "--standalone"})
    EXPECT_NE(help.find(std::string("\n  ") + f), std::string::npos) << f << "\n" << help;
  for (const FlagSpec& f : kLaunchSpec.flags) {
    EXPECT_FALSE(f.hidden) << f.name;
    EXPECT_NE(help.find("\n  " + f.name), std::string::npos) << f.name;
  }
}
