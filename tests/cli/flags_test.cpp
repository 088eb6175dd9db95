#include "biofm/cli/flags.h"

#include <gtest/gtest.h>

#include "biofm/core/profiling.h"

using namespace biofm;

namespace {

const CommandSpec kSpec{"demo", "IN [--out FILE]", "A demo command.",
                        {{"--out", "FILE", "output file"}, {"--steps", "N", "how many"}, {"--fast", "", "go fast"}}};

Flags parse(std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("biofm"), const_cast<char*>("demo")};
  for (auto& a : args) argv.push_back(a.data());
  return parse_flags(kSpec, int(argv.size()), argv.data());
}

}  // namespace

TEST(Flags, ParsesValuesBooleansAndPositionals) {
  Flags f = parse({"a.txt", "--out", "x.html", "--steps=7", "--fast", "key=v"});
  EXPECT_EQ(f.get("--out"), "x.html");
  EXPECT_EQ(f.get_int("--steps", 0), 7);
  EXPECT_TRUE(f.has("--fast"));
  EXPECT_FALSE(f.help());
  EXPECT_EQ(f.positional(), (std::vector<std::string>{"a.txt", "key=v"}));
  EXPECT_EQ(f.get("--missing", "fallback"), "fallback");
  EXPECT_TRUE(parse({"--help"}).help());
  EXPECT_TRUE(parse({"-h"}).help());
}

TEST(Flags, MistakesAreUsageErrors) {
  try {
    parse({"--stpes", "3"});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean '--steps'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse({"--out"}), UsageError);             // missing value
  EXPECT_THROW(parse({"--fast=yes"}), UsageError);        // boolean with a value
  EXPECT_THROW(parse({"--steps", "x"}).get_int("--steps", 0), UsageError);
  EXPECT_THROW(parse({}).require("--out"), UsageError);
}

TEST(Flags, HelpComesFromTheTable) {
  const std::string h = help_text(kSpec);
  EXPECT_EQ(h.rfind("usage: biofm demo IN [--out FILE]\n", 0), 0u) << h;
  for (const auto& f : kSpec.flags) EXPECT_NE(h.find(f.name), std::string::npos) << f.name;
  EXPECT_NE(h.find("--out FILE"), std::string::npos);
  EXPECT_NE(h.find("output file"), std::string::npos);
  EXPECT_NE(h.find("--help"), std::string::npos);
}

TEST(ProfilerWindow, CapturesTheConfiguredSteps) {
  ProfilerWindow::configure(3, 4, 1);  // resumed after step 1: the next step is 2
  std::vector<bool> seen;
  for (int i = 0; i < 5; ++i) {
    ProfilerWindow::step_begin();
    seen.push_back(ProfilerWindow::capturing());
    ProfilerWindow::step_end();
  }
  EXPECT_EQ(seen, (std::vector<bool>{false, true, true, false, false}));  // steps 2..6
  EXPECT_EQ(ProfilerWindow::current_step(), 6);
  ProfilerWindow::configure(-1, -1, 0);
  ProfilerWindow::step_begin();
  EXPECT_FALSE(ProfilerWindow::capturing());
  ProfilerWindow::step_end();
  NvtxRange r("compiles without CUDA");
}
