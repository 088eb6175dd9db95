// biofm: train and run biological sequence foundation models.
//
// Exit codes: 0 success; 1 runtime error (bad config value, unreadable file, training
// diverged, ...); 2 usage error (unknown command or flag, missing argument).
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/error.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* synopsis;
  const char* summary;
};

const Command kCommands[] = {
    {"train", biofm::cmd_train, "--config-name NAME [--config-dir DIR] [key.sub=value ...]",
     "train a model from NAME.yaml with dotted overrides"},
    {"embed", biofm::cmd_embed, "--model DIR --input FILE --output OUT.safetensors|DIR [--layers] [--pooling]",
     "hidden states (pooled or per token, any layers) of an ESM-2 or Llama model"},
    {"eval", biofm::cmd_eval, "--model DIR --input FILE [--output OUT.json]",
     "ESM-2: masked-LM loss, accuracy, perplexity; Llama: next-token NLL over A/C/G/T"},
    {"score", biofm::cmd_score, "--model DIR --input FILE [--mutations FILE] [--track OUT] [--output OUT.tsv]",
     "ESM-2: pseudo-log-likelihoods, variant effects; Llama: NLL and per-base tracks"},
    {"generate", biofm::cmd_generate, "--model DIR --prompt ACGT... [--max-new-tokens 100] [...]",
     "continue a DNA prompt with a Llama model (KV-cached decoding)"},
    {"bench", biofm::cmd_bench, "--model esm2 --shape 650M --data FILE",
     "training throughput (tokens/s, MFU, memory) of a model shape"},
    {"prepare", biofm::cmd_prepare, "--input DATA --output DIR --family esm2|llama [--val-fraction F] [--dedup]",
     "tokenize a dataset once into memory-mapped shards for training"},
    {"bench-data", biofm::cmd_bench_data, "--data DATA --family esm2|llama [--seconds 5]",
     "loader throughput and memory on one thread; --synthetic N writes a test dataset"},
    {"report", biofm::cmd_report, "RUN_DIR [RUN_DIR ...] [--output report.html]",
     "one self-contained HTML page of runs' curves and configs"},
    {"launch", biofm::cmd_launch, "--nproc-per-node N [--nnodes M --node-rank R --master ADDR:PORT] COMMAND [ARGS...]",
     "start this node's processes of a multi-process run (torchrun's variables)"},
    {"info", biofm::cmd_info, "", "build and device information"},
};

std::string usage() {
  std::string s =
      "usage: biofm <command> [options]\n"
      "       biofm --version | --help\n\ncommands:\n";
  for (const Command& c : kCommands) {
    s += std::string("  ") + c.name + (*c.synopsis ? " " : "") + c.synopsis + "\n";
    s += std::string("      ") + c.summary + "\n";
  }
  s += "\nRun 'biofm <command> --help' for the options of a command.\n"
       "Exit codes: 0 success, 1 runtime error, 2 usage error.\n";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(usage().c_str(), stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::printf("biofm %s\n", BIOFM_VERSION);
    return 0;
  }
  const Command* found = nullptr;
  for (const Command& c : kCommands)
    if (cmd == c.name) found = &c;
  if (!found) {
    std::fprintf(stderr, "biofm: unknown command '%s'\n\n%s", cmd.c_str(), usage().c_str());
    return 2;
  }
  try {
    const int rc = found->run(argc, argv);
    // GPU library state and cached blocks go back before exit, so that a leak check
    // (compute-sanitizer --leak-check full) reports only memory that something still holds.
    biofm::device_release_at_exit();
    return rc;
  } catch (const biofm::UsageError& e) {
    std::fprintf(stderr, "%s\nRun 'biofm %s --help' for usage.\n", e.what(), cmd.c_str());
    return 2;
  } catch (const biofm::Error& e) {
    std::fprintf(stderr, "biofm %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::bad_alloc&) {  // an input too large for this machine is not a bug
    std::fprintf(stderr, "biofm %s: error: out of memory\n", cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biofm %s: internal error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
