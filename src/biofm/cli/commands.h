// The biofm subcommands. Each returns the process exit code; errors are thrown as
// biofm::Error (exit 1) or biofm::UsageError (cli/flags.h; exit 2) and reported by main.
#pragma once

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
}  // namespace biofm
