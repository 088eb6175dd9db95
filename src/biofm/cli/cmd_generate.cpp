// biofm generate: continue a DNA prompt with a Llama model (KV-cached incremental decoding).
//
// Output is FASTA-like: one record per sample, a header line with the settings and the stop
// reason, then the generated bases (the prompt is not repeated; a final <EOS> is not printed).
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/model_flags.h"
#include "biofm/data/tokenizer.h"
#include "biofm/models/llama/generate.h"
#include "biofm/models/llama/model.h"
#include "biofm/models/registry.h"

namespace biofm {

const CommandSpec kGenerateSpec{
    .name = "generate",
    .synopsis =
        "--model DIR --prompt ACGT... [--max-new-tokens 100] [--temperature 0] [--top-k 0]\n"
        "       [--seed 42] [--num-samples 1] [--device auto] [--precision bf16|fp32] [--no-cache] [--ignore-eos]",
    .summary = "continue a DNA prompt with a Llama model (KV-cached decoding)",
    .flags = {
        {"--model", "DIR", "model directory (model_type llama)"},
        {"--prompt", "BASES", "DNA to continue"},
        {"--max-new-tokens", "N", "at most N new tokens (default 100)"},
        {"--temperature", "T", "0 = greedy (default 0)"},
        {"--top-k", "K", "sample among the K most likely tokens; 0 = all (default 0)"},
        {"--seed", "N", "sampling seed; sample i uses seed + i (default 42)"},
        {"--num-samples", "N", "samples to generate (default 1)"},
        device_flag(),
        precision_flag(/*with_fp8=*/false),
        ops_flag(),
        {"--force", "", "accept prompt characters that are not nucleotide codes (with a warning)"},
        {"--no-cache", "", "recompute the whole prefix every step (no KV cache)"},
        {"--ignore-eos", "", "do not stop at <EOS>"},
        {"--any-token", "", "pick from the whole vocabulary, not only nucleotide codes and <EOS> (may print other bytes)"},
    },
    .details =
        "Continues the prompt (<BOS> + its bases) with a Llama model. --temperature 0 decodes greedily;\n"
        "otherwise tokens are sampled from softmax(logits / temperature), restricted to the --top-k most\n"
        "likely ones (0 = all), reproducibly from --seed (sample i uses seed + i). Generation stops at <EOS>\n"
        "(unless --ignore-eos) or after --max-new-tokens. --no-cache recomputes the whole prefix every step\n"
        "(the reference path; slower, same tokens). Prints one FASTA record per sample.\n"
        "A prompt character that is not a nucleotide code (A C G T U N and IUPAC R Y K M S W B D H V, either case)\n"
        "is refused, naming it; --force goes on with a warning. Generated tokens are nucleotide codes (the same\n"
        "set) or <EOS>: the other tokens of a byte-level vocabulary are never picked (--any-token allows them).",
};

namespace {
// The characters a DNA prompt may hold, and what generation may print (IUPAC codes, either case).
constexpr const char* kNucleotideCodes = "ACGTUNRYKMSWBDHVacgtunrykmswbdhv";
}  // namespace

int cmd_generate(int argc, char** argv) {
  const Flags a = parse_flags(kGenerateSpec, argc, argv);
  if (a.help()) {
    print_help(kGenerateSpec);
    return 0;
  }
  a.expect_no_positional();
  require_one_process("generate");
  const std::string dir = a.require("--model"), prompt = a.require("--prompt");
  const Device dev = parse_device(a.get("--device", "auto"));
  apply_ops_flag(a);
  if (a.get("--precision") == "fp8")
    throw UsageError("--precision fp8 is for embed, score and eval; generate takes bf16 or fp32");
  const InferencePrecision precision = parse_inference_precision(a.get("--precision"), dev);
  if (prompt.empty()) usage_fail("--prompt is empty: give the sequence to continue");
  // Characters a DNA model never saw in training: refused (or, with --force, a warning).
  std::string odd;
  size_t odd_count = 0, first_odd = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const char c = prompt[i];
    if (std::strchr(kNucleotideCodes, c) && c != 0) continue;
    if (odd_count++ == 0) first_odd = i;
    if (odd.find(c) == std::string::npos && odd.size() < 16) odd += c;
  }
  if (odd_count) {
    std::string shown;
    for (char c : odd)
      shown += (shown.empty() ? "'" : ", '") + (std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : "?") + "'";
    if (!a.has("--force"))
      fail("--prompt has ", odd_count, " character(s) that are not nucleotide codes (first at position ", first_odd + 1,
           "; ", shown, "): a DNA model gives meaningless continuations; --force to go on anyway");
    std::fprintf(stderr, "warning: --prompt has %zu character(s) that are not nucleotide codes (%s)\n", odd_count,
                 shown.c_str());
  }
  GenerateOptions o;
  o.max_new_tokens = int(a.get_int("--max-new-tokens", 100, 0, kMaxFlagTokens));
  o.temperature = float(a.get_double("--temperature", 0.0, 0.0, 1e6));
  o.top_k = int(a.get_int("--top-k", 0, 0, kMaxFlagTokens));
  o.use_cache = !a.has("--no-cache");
  o.stop_at_eos = !a.has("--ignore-eos");
  const long long seed = a.get_int("--seed", 42);
  const long long samples = a.get_int("--num-samples", 1, 1, 1 << 20);

  const ModelFamily& family = family_of_dir(dir);
  if (!family.generate)
    fail("generate needs a causal LM that supports it (model_type llama); '", dir, "' holds model_type '",
         family.hf_model_type, "'");

  std::unique_ptr<LanguageModel> loaded = load_model(family, dir, dev, precision);
  auto* model = dynamic_cast<LlamaModel*>(loaded.get());
  if (!model) fail("generate: '", dir, "' did not load as a Llama model");
  const Tokenizer& tok = family.tokenizer();
  std::vector<int32_t> ids{tok.begin_id()};
  const uint64_t unknown = tok.encode_residues(prompt, ids);
  if (unknown) std::fprintf(stderr, "warning: %llu prompt characters map to <UNK>\n", (unsigned long long)unknown);
  if (!a.has("--any-token")) {  // the nucleotide codes the tokenizer knows, and <EOS>
    for (const char* c = kNucleotideCodes; *c; ++c) {
      std::vector<int32_t> one;
      if (tok.encode_residues(std::string(1, *c), one) == 0 && one.size() == 1) o.allowed.push_back(one[0]);
    }
    if (o.stop_at_eos) o.allowed.push_back(int32_t(model->config().eos_token_id));
  }
  const int64_t limit = model->config().max_position_embeddings;
  if (int64_t(ids.size()) + o.max_new_tokens > limit)
    std::fprintf(stderr, "warning: prompt + max-new-tokens (%lld) exceeds max_position_embeddings (%lld)\n",
                 (long long)(int64_t(ids.size()) + o.max_new_tokens), (long long)limit);
  for (long long s = 0; s < samples; ++s) {
    o.seed = uint64_t(seed + s);
    GenerateResult r = generate(*model, ids, o);
    std::vector<int32_t> body = r.tokens;
    if (r.stopped_at_eos) body.pop_back();
    std::printf(">sample_%lld prompt_length=%zu new_tokens=%zu stop=%s temperature=%g top_k=%lld seed=%llu\n%s\n", s,
                prompt.size(), r.tokens.size(), r.stopped_at_eos ? "eos" : "max_new_tokens", double(o.temperature),
                (long long)o.top_k, (unsigned long long)o.seed, tok.decode(body).c_str());
  }
  return 0;
}

}  // namespace biofm
