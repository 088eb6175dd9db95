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

TEST(Flags, RangesAndNumbers) {
  // A value that does not parse and one outside its range are both usage errors (exit 2),
  // naming the command, the flag and the range.
  Flags f = parse({"--steps", "7", "--out", "0.5"});
  EXPECT_EQ(f.get_int("--steps", 0, 1, 10), 7);
  EXPECT_EQ(f.get_int("--missing", 99, 1, 10), 99);  // the fallback is not checked
  EXPECT_DOUBLE_EQ(f.get_double("--out", 0, 0, 1), 0.5);
  EXPECT_DOUBLE_EQ(f.get_double("--missing", 2.5, 0, 1), 2.5);
  try {
    (void)parse({"--steps", "11"}).get_int("--steps", 0, 1, 10);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("biofm demo: --steps must lie in [1, 10], got 11"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)parse({"--steps", "-5"}).get_int("--steps", 0, 1, 10), UsageError);
  EXPECT_THROW((void)parse({"--steps", "3x"}).get_int("--steps", 0, 1, 10), UsageError);
  EXPECT_THROW((void)parse({"--out", "abc"}).get_double("--out", 0, 0, 1), UsageError);
  for (const char* v : {"nan", "inf", "-0.1", "1.5"}) {
    try {
      (void)parse({"--out", v}).get_double("--out", 0, 0, 1);
      ADD_FAILURE() << v << ": no error";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--out must be a finite number"), std::string::npos) << e.what();
    }
  }
  // A negative number after a value flag is its value, not a flag.
  EXPECT_EQ(parse({"--steps", "-5"}).get_int("--steps", 0), -5);
  // Flag combinations a command refuses: a usage error naming the command.
  try {
    parse({}).fail_usage("--a needs --b");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "biofm demo: --a needs --b");
  }
}

TEST(Flags, ChoicesComeFromTheMetavariable) {
  const CommandSpec spec{"demo", "", "", {{"--mode", "fast|slow|auto", "how"}, {"--out", "A|B FILE", "not a list"}}};
  EXPECT_EQ(flag_choices(spec.flags[0]), (std::vector<std::string>{"fast", "slow", "auto"}));
  EXPECT_TRUE(flag_choices(spec.flags[1]).empty());  // a metavariable with a space is not a list
  auto parse_spec = [&](std::vector<std::string> args) {
    std::vector<char*> argv = {const_cast<char*>("biofm"), const_cast<char*>("demo")};
    for (auto& a : args) argv.push_back(a.data());
    return parse_flags(spec, int(argv.size()), argv.data());
  };
  EXPECT_EQ(parse_spec({"--mode", "slow"}).get("--mode"), "slow");
  EXPECT_EQ(parse_spec({"--mode=auto"}).get("--mode"), "auto");
  EXPECT_EQ(parse_spec({"--out", "anything"}).get("--out"), "anything");
  for (std::vector<std::string> bad : {std::vector<std::string>{"--mode", "quick"}, {"--mode="}, {"--mode", "FAST"}}) {
    try {
      parse_spec(bad);
      ADD_FAILURE() << bad.back() << ": no error";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("biofm demo: --mode must be fast, slow or auto, got '"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_NE(help_text(spec).find("--mode fast|slow|auto"), std::string::npos) << help_text(spec);
}

TEST(Flags, PositionalsCanBeRefused) {
  parse({"--out", "x"}).expect_no_positional();
  try {
    parse({"--out", "x", "stray"}).expect_no_positional();
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected argument 'stray'"), std::string::npos) << e.what();
  }
}

TEST(Flags, HiddenFlagsParseButAreNotShown) {
  const CommandSpec spec{"demo", "", "", {{"--steps", "N", "how many"}, {"--dump", "FILE", "debug output", true}}};
  std::vector<std::string> args = {"biofm", "demo", "--dump", "d.bin"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_EQ(parse_flags(spec, int(argv.size()), argv.data()).get("--dump"), "d.bin");
  EXPECT_EQ(help_text(spec).find("--dump"), std::string::npos) << help_text(spec);
  args = {"biofm", "demo", "--dumb"};
  argv.clear();
  for (auto& a : args) argv.push_back(a.data());
  try {
    parse_flags(spec, int(argv.size()), argv.data());
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).find("'--dump'"), std::string::npos) << "suggested a hidden flag: " << e.what();
  }
}

TEST(Flags, HelpComesFromTheTable) {
  const std::string h = help_text(kSpec);
  EXPECT_EQ(h.rfind("usage: biofm demo IN [--out FILE]\n", 0), 0u) << h;
  for (const auto& f : kSpec.flags) EXPECT_NE(h.find(f.name), std::string::npos) << f.name;
  EXPECT_NE(h.find("--out FILE"), std::string::npos);
  EXPECT_NE(h.find("output file"), std::string::npos);
  EXPECT_NE(h.find("--help"), std::string::npos);
}

TEST(Flags, HelpHasTheSummaryDetailsAndTail) {
  const CommandSpec spec{.name = "demo",
                         .synopsis = "[--x N]",
                         .summary = "one line about demo",
                         .flags = {{"--x", "N", "a number"}},
                         .details = "More about demo.",
                         .help_tail = [] { return std::string("extra: generated\n"); }};
  const std::string h = help_text(spec);
  EXPECT_EQ(h.rfind("usage: biofm demo [--x N]\none line about demo\n\nMore about demo.\n\noptions:\n", 0), 0u) << h;
  const size_t options = h.find("--x N"), tail = h.find("extra: generated\n");
  ASSERT_NE(tail, std::string::npos) << h;
  EXPECT_LT(options, tail) << h;  // after the options
  EXPECT_EQ(h.substr(h.size() - 17), "extra: generated\n") << h;
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
