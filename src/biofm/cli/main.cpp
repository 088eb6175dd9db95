// biofm: train and run biological sequence foundation models.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "biofm/cli/commands.h"
#include "biofm/core/error.h"

namespace {

const char* kUsage =
    "usage: biofm <command> [options]\n"
    "\n"
    "commands:\n"
    "  train --config-name NAME [--config-dir DIR] [key.sub=value ...]\n"
    "                          train a model from configs/NAME.yaml with dotted overrides\n"
    "  embed --model DIR --input FILE --output OUT.safetensors [--per-token] [--logits]\n"
    "                          per-sequence mean-pooled final hidden states of an ESM-2 model\n"
    "  eval  --model DIR --input FILE [--output OUT.json]\n"
    "                          ESM-2: masked-LM loss, accuracy and perplexity (deterministic 15% masking);\n"
    "                          Llama: per-sequence next-token NLL over A/C/G/T, loss and perplexity\n"
    "  generate --model DIR --prompt ACGT... [--max-new-tokens 100] [--temperature 0] [--top-k 0] [--seed 42]\n"
    "                          continue a DNA prompt with a Llama model (KV-cached decoding)\n"
    "  bench --model esm2 --shape 650M --data FILE\n"
    "                          training throughput (tokens/s, MFU, memory) of a model shape\n"
    "  info                    build and device information\n"
    "\n"
    "Run 'biofm <command> --help' for the options of a command.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "train") return biofm::cmd_train(argc, argv);
    if (cmd == "embed") return biofm::cmd_embed(argc, argv);
    if (cmd == "eval") return biofm::cmd_eval(argc, argv);
    if (cmd == "generate") return biofm::cmd_generate(argc, argv);
    if (cmd == "info") return biofm::cmd_info(argc, argv);
    if (cmd == "bench") return biofm::cmd_bench(argc, argv);
    if (cmd == "launch") return biofm::cmd_launch(argc, argv);
    std::fprintf(stderr, "biofm: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const biofm::Error& e) {
    std::fprintf(stderr, "biofm %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biofm %s: internal error: %s\n", cmd.c_str(), e.what());
    return 3;
  }
}
