// The biofm subcommands. Each returns the process exit code; errors are thrown as
// biofm::Error (exit 1) or biofm::UsageError (cli/flags.h; exit 2) and reported by main.
// Each command's CommandSpec (name, synopsis, one-line summary, flags) is declared once, in its
// cmd_*.cpp: the command parses its flags and prints its --help from it, and `biofm --help`
// lists the commands from the same specs (kCommands).
#pragma once
#include "biofm/cli/flags.h"

namespace biofm {
int cmd_train(int argc, char** argv);
int cmd_embed(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_score(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_launch(int argc, char** argv);
int cmd_prepare(int argc, char** argv);
int cmd_bench_data(int argc, char** argv);

extern const CommandSpec kTrainSpec, kEmbedSpec, kEvalSpec, kScoreSpec, kGenerateSpec, kInfoSpec, kBenchSpec,
    kReportSpec, kLaunchSpec, kPrepareSpec, kBenchDataSpec;

struct Command {
  const CommandSpec* spec;
  int (*run)(int, char**);
};
// Every command, in the order `biofm --help` lists them.
inline constexpr Command kCommands[] = {
    {&kTrainSpec, cmd_train},       {&kEmbedSpec, cmd_embed},     {&kEvalSpec, cmd_eval},
    {&kScoreSpec, cmd_score},       {&kGenerateSpec, cmd_generate}, {&kBenchSpec, cmd_bench},
    {&kPrepareSpec, cmd_prepare},   {&kBenchDataSpec, cmd_bench_data}, {&kReportSpec, cmd_report},
    {&kLaunchSpec, cmd_launch},     {&kInfoSpec, cmd_info},
};
}  // namespace biofm
