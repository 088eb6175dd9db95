// biofm score: per-sequence and per-variant scores from a model's own probabilities, as TSV
// with a header (the math is in infer/scoring.h).
//   ESM-2: pseudo-log-likelihood of every sequence; with --mutations, masked-marginal scores of
//          the listed variants of the (single) input sequence.
//   Llama: per-sequence NLL over A/C/G/T (windows as eval), and with --track per-base
//          log-likelihoods as bedGraph (OUT.bedgraph) or TSV.
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/model_flags.h"
#include "biofm/data/dataset.h"
#include "biofm/infer/alphabet.h"
#include "biofm/infer/input.h"
#include "biofm/infer/scoring.h"
#include "biofm/io/stream_file.h"
#include "biofm/io/utf8.h"
#include "biofm/models/registry.h"

namespace biofm {

const CommandSpec kScoreSpec{
    .name = "score",
    .synopsis =
        "--model DIR --input FILE [--output OUT.tsv] [--mutations FILE] [--track OUT.bedgraph|OUT.tsv]\n"
        "       [--device auto] [--precision bf16|fp8|fp32] [--max-tokens N] [--max-seq-length N] [--window N --stride N]",
    .summary = "ESM-2: pseudo-log-likelihoods, variant effects; Llama: NLL and per-base tracks",
    .flags = {
        {"--model", "DIR", "model directory (config.json + weights)"},
        {"--input", "FILE", "sequences (fasta, csv, tsv, jsonl or text; plain, .gz or .zst)"},
        {"--output", "OUT", "TSV file (default: stdout)"},
        {"--mutations", "FILE", "esm: variants of the one input sequence to score"},
        {"--track", "OUT", "llama: per-base log-likelihoods (.bedgraph, or TSV)"},
        device_flag(),
        precision_flag(),
        ops_flag(),
        {"--max-tokens", "N", "tokens per batch (default 16384 on a GPU, 8192 on the CPU)"},
        {"--max-seq-length", "N", "esm: tokens per sequence, longer ones truncated (default 1024 or max positions)"},
        {"--window", "N", "llama: tokens per window (default: the model's max_position_embeddings)"},
        {"--stride", "N", "llama: bases shared by consecutive windows (default 200, or half the window if smaller)"},
        {"--chunk", "N", "records read from --input and scored per pass (bounds memory; default 1000)"},
        {"--progress", "", "print the progress line even when stderr is not a terminal"},
        {"--format", "F", "input format: auto | fasta | csv | tsv | jsonl | text (default auto)"},
        {"--column", "NAME", "csv/tsv column or jsonl field holding the sequence (default sequence)"},
        split_flag(),
    },
    .details =
        "ESM-2 models: the pseudo-log-likelihood of each sequence (every residue masked in turn, batched):\n"
        "columns name, length, scored, pll, mean_pll, pseudo_perplexity = exp(-mean_pll), truncated.\n"
        "With --mutations FILE (one variant per line: A123G, or A123G:L45P for several; 1-based positions;\n"
        "or a CSV/TSV with a 'mutant' column, as ProteinGym's) and one wild-type sequence in --input: the\n"
        "masked-marginal score of each variant, Σ log p(mutant) - log p(wild type) at each mutated position\n"
        "masked alone (fair-esm's masked-marginals): columns mutant, score. A wild-type residue that does not\n"
        "match the sequence is an error naming the line.\n"
        "Llama models: per-sequence next-token NLL over A/C/G/T in windows of --window tokens (default: the\n"
        "model's context) overlapping by --stride bases, each base scored once: columns name, length, scored,\n"
        "nll, mean_nll. --track writes each scored base's log-likelihood: bedGraph (name, start, end, value;\n"
        "0-based) for a .bedgraph/.bdg name, else TSV (name, position (1-based), base, log_likelihood).\n"
        "Natural logarithms throughout. The TSV goes to --output or stdout. The input is never held whole: a first\n"
        "pass counts records and tokens (for the progress line) keeping nothing, then --chunk records are read,\n"
        "scored and written at a time. See docs/INFERENCE.md.",
};

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Text output to a file (temporary name, renamed when complete) or stdout.
class TextOut {
 public:
  explicit TextOut(const std::string& path) {
    if (!path.empty()) file_ = std::make_unique<AtomicFileWriter>(path);
  }
  void write(const std::string& s) {
    if (file_) file_->write(s.data(), s.size());
    else std::fwrite(s.data(), 1, s.size(), stdout);
  }
  void commit() {
    if (file_) file_->commit();
    else std::fflush(stdout);
  }

 private:
  std::unique_ptr<AtomicFileWriter> file_;
};

// A record name as one TSV field: valid UTF-8, no tabs or line breaks.
std::string field(Utf8Cleaner& clean, std::string_view name) {
  std::string s = clean(name);
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "nan";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

int cmd_score(int argc, char** argv) {
  const Flags a = parse_flags(kScoreSpec, argc, argv);
  if (a.help()) {
    print_help(kScoreSpec);
    return 0;
  }
  a.expect_no_positional();
  require_one_process("score");
  const std::string model_dir = a.require("--model"), input = a.require("--input");
  const Device dev = parse_device(a.get("--device", "auto"));
  apply_ops_flag(a);
  const InferencePrecision precision = parse_inference_precision(a.get("--precision"), dev);
  const ModelFamily& family = family_of_dir(model_dir);
  const bool causal = family.objective == Objective::CausalLM;
  if (causal) {
    for (const char* f : {"--mutations", "--max-seq-length"})
      if (a.has(f)) fail(f, " applies to masked LMs (ESM-2) only");
  } else {
    for (const char* f : {"--track", "--window", "--stride"})
      if (a.has(f)) fail(f, " applies to causal LMs (Llama) only");
  }
  const int64_t chunk = a.get_int("--chunk", 1000, 1, int64_t(1) << 30);
  std::unique_ptr<LanguageModel> model = load_model(family, model_dir, dev, precision);
  const Tokenizer& tok = family.tokenizer();
  const int64_t max_pos = model->dims().max_positions;
  const int64_t max_tokens = a.get_int("--max-tokens", dev == Device::CUDA ? 16384 : 8192, 1, kMaxFlagTokens);
  // The input is read --chunk records at a time, never whole. A first pass counts the records and
  // sums what the progress line needs (each record's tokens), keeping nothing else.
  infer::InputStream in = open_input(a, input, family.tokenizer());
  infer::AlphabetReport alphabet = infer::alphabet_report(tok);
  const int64_t esm_len = causal ? 0 : a.get_int("--max-seq-length", std::min<int64_t>(1024, max_pos), 3, kMaxFlagTokens);
  int64_t total_tokens = 0;
  const DatasetStats stats = infer::scan(
      in,
      [&](uint64_t, std::string_view seq) {
        alphabet.add(seq);
        if (causal) {
          total_tokens += int64_t(seq.size()) + 2;
        } else {
          const int64_t L = std::min<int64_t>(int64_t(seq.size()), esm_len - 2);
          total_tokens += L * (L + 2);
        }
      },
      uint64_t(chunk));
  const std::string alpha = alphabet.warning();
  if (!alpha.empty()) std::fprintf(stderr, "%s\n", alpha.c_str());
  const uint64_t n = stats.records;
  SequenceDataset data;  // the records of the chunk at hand
  auto read_chunk = [&](uint64_t first, uint64_t count) {
    if (in.read(count, data) != count)
      fail("score: ", input, " ended after ", first + data.size(), " records; the first pass counted ", n,
           " (did it change during the run?)");
  };
  const bool show = a.has("--progress") || infer::stderr_is_terminal();
  Utf8Cleaner clean(input);
  TextOut out(a.get("--output"));

  if (!causal && a.has("--mutations")) {
    if (n != 1)
      fail("--mutations scores variants of one wild-type sequence; '", input, "' holds ", n, " records");
    read_chunk(0, 1);
    const std::string_view wt = data.sequence(0);
    if (int64_t(wt.size()) + 2 > max_pos)
      fail("the wild type (", wt.size(), " residues) is longer than the model's context (", max_pos - 2, ")");
    const std::vector<infer::MutationSet> sets = infer::read_mutations(a.get("--mutations"), wt, tok);
    std::set<int64_t> positions;
    for (const auto& s : sets)
      for (const auto& m : s.muts) positions.insert(m.pos);
    const auto lp = infer::masked_log_probs(*model, tok, wt, std::vector<int64_t>(positions.begin(), positions.end()),
                                            max_tokens);
    out.write("mutant\tscore\n");
    for (const auto& s : sets) out.write(s.text + "\t" + num(infer::masked_marginal_score(s, lp, tok)) + "\n");
    out.commit();
    std::fprintf(stderr, "scored %zu variants at %zu positions of '%s' (%zu residues)\n", sets.size(),
                 positions.size(), field(clean, data.name(0)).c_str(), wt.size());
    return 0;
  }

  if (!causal) {
    infer::MaskedLmOptions o;
    o.max_seq_length = esm_len;
    const std::string w = infer::length_warning("--max-seq-length", o.max_seq_length, max_pos);
    if (!w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
    o.max_tokens = std::max(max_tokens, o.max_seq_length);
    infer::Progress progress("score", int64_t(n), total_tokens, show);
    out.write("name\tlength\tscored\tpll\tmean_pll\tpseudo_perplexity\ttruncated\n");
    uint64_t truncated = 0;
    for (uint64_t first = 0; first < n; first += uint64_t(chunk)) {
      const uint64_t count = std::min<uint64_t>(uint64_t(chunk), n - first);
      read_chunk(first, count);
      const auto res = infer::pseudo_log_likelihoods(*model, tok, data, 0, count, o, &progress);
      for (uint64_t r = 0; r < count; ++r) {
        const auto& x = res[r];
        const double mean = x.positions > 0 ? x.pll / double(x.positions) : NAN;
        truncated += x.truncated;
        out.write(field(clean, data.name(r)) + "\t" + std::to_string(data.length(r)) + "\t" +
                  std::to_string(x.positions) + "\t" + num(x.pll) + "\t" + num(mean) + "\t" + num(std::exp(-mean)) +
                  "\t" + (x.truncated ? "1" : "0") + "\n");
      }
    }
    out.commit();
    progress.finish();
    if (truncated)
      std::fprintf(stderr, "warning: %llu of %llu sequences were truncated to %lld tokens (scored on their start)\n",
                   (unsigned long long)truncated, (unsigned long long)n, (long long)o.max_seq_length);
    return 0;
  }

  infer::CausalOptions o;
  o.window_tokens = a.get_int("--window", max_pos, 3, kMaxFlagTokens);
  o.stride = a.get_int("--stride", std::min<int64_t>(200, (o.window_tokens - 2) / 2), 0, kMaxFlagTokens);
  const std::string w = infer::length_warning("--window", o.window_tokens, max_pos);
  if (!w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
  o.max_tokens = std::max(max_tokens, o.window_tokens);
  const std::string track_path = a.get("--track");
  o.per_base = !track_path.empty();
  const bool bedgraph = ends_with(track_path, ".bedgraph") || ends_with(track_path, ".bdg") ||
                        ends_with(track_path, ".bedGraph");
  std::unique_ptr<TextOut> track = o.per_base ? std::make_unique<TextOut>(track_path) : nullptr;
  if (track && !bedgraph) track->write("name\tposition\tbase\tlog_likelihood\n");
  infer::Progress progress("score", int64_t(n), total_tokens, show);
  out.write("name\tlength\tscored\tnll\tmean_nll\n");
  for (uint64_t first = 0; first < n; first += uint64_t(chunk)) {
    const uint64_t count = std::min<uint64_t>(uint64_t(chunk), n - first);
    read_chunk(first, count);
    const auto res = infer::causal_log_likelihoods(*model, tok, data, 0, count, o, &progress);
    for (uint64_t r = 0; r < count; ++r) {
      const auto& x = res[r];
      const std::string name = field(clean, data.name(r));
      out.write(name + "\t" + std::to_string(data.length(r)) + "\t" + std::to_string(x.scored) + "\t" +
                num(x.nll) + "\t" + num(x.scored > 0 ? x.nll / double(x.scored) : NAN) + "\n");
      if (!track) continue;
      const std::string_view seq = data.sequence(r);
      std::string lines;
      for (size_t i = 0; i < x.base_ll.size(); ++i) {
        if (std::isnan(x.base_ll[i])) continue;
        if (bedgraph)
          lines += name + "\t" + std::to_string(i) + "\t" + std::to_string(i + 1) + "\t" + num(x.base_ll[i]) + "\n";
        else
          lines += name + "\t" + std::to_string(i + 1) + "\t" + std::string(1, seq[i]) + "\t" + num(x.base_ll[i]) + "\n";
      }
      track->write(lines);
    }
  }
  out.commit();
  if (track) track->commit();
  progress.finish();
  return 0;
}

}  // namespace biofm
