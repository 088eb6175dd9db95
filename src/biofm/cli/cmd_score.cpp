// biofm score: per-sequence and per-variant scores from a model's own probabilities, as TSV
// with a header (the math is in infer/scoring.h).
//   ESM-2: pseudo-log-likelihood of every sequence; with --mutations, masked-marginal scores of
//          the listed variants of the (single) input sequence.
//   Llama: per-sequence NLL over A/C/G/T (windows as eval), and with --track per-base
//          log-likelihoods as bedGraph (OUT.bedgraph) or TSV.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
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
        {"--track", "OUT", "llama: per-base log-likelihoods (bedGraph for .bedgraph/.bdg, any case; else TSV)"},
        device_flag(),
        precision_flag(),
        ops_flag(),
        {"--max-tokens", "N", "tokens per batch (default 16384 on a GPU, 8192 on the CPU)"},
        {"--max-seq-length", "N", "esm: tokens per sequence, longer ones truncated (default 1024 or max positions; not with --mutations)"},
        {"--window", "N", "llama: tokens per window (default: the model's max_position_embeddings)"},
        {"--stride", "N", "llama: bases shared by consecutive windows (default 200, or (window - 2) / 2 if smaller)"},
        uppercase_labels_flag(),
        {"--chunk", "N", "records read from --input and scored per pass (bounds memory; default 1000)"},
        {"--progress", "", "print the progress line even when stderr is not a terminal"},
        format_flag(),
        column_flag(),
        name_column_flag(),
        split_flag(),
    },
    .details =
        "ESM-2 models: the pseudo-log-likelihood of each sequence (every residue masked in turn, batched):\n"
        "columns name, length, scored, pll, mean_pll, pseudo_perplexity = exp(-mean_pll), truncated. Residues\n"
        "outside the model's alphabet (read as <unk>, e.g. '*') are context only, not in pll or scored (warned).\n"
        "With --mutations FILE (one variant per line: A123G, or A123G:L45P for several; 1-based positions;\n"
        "or a CSV/TSV with a 'mutant' column, as ProteinGym's) and one wild-type sequence in --input: the\n"
        "masked-marginal score of each variant, Σ log p(mutant) - log p(wild type) at each mutated position\n"
        "masked alone (fair-esm's masked-marginals), the whole wild type as context: columns mutant, score.\n"
        "Both residues of a variant must be among the 20 standard amino acids (ACDEFGHIKLMNPQRSTVWY), and\n"
        "the wild-type one must match the sequence; else an error names the line.\n"
        "Llama models: per-sequence next-token NLL over A/C/G/T in windows of --window tokens (default: the\n"
        "model's context) overlapping by --stride bases, each base scored once: columns name, length, scored,\n"
        "nll, mean_nll. --track writes each scored base's log-likelihood: bedGraph (name, start, end, value;\n"
        "0-based) for a name ending in .bedgraph or .bdg (any case), else TSV (name, position (1-based), base,\n"
        "log_likelihood); a .bed name gets TSV too (bedGraph is not BED). Lowercase a/c/g/t targets are scored as\n"
        "A/C/G/T when the model was trained so (its config.json's biofm_uppercase_labels) or --uppercase-labels true.\n"
        "One row per input record, in input order (join by position); an empty record's row has length 0 and\n"
        "nan scores, and empty records are counted in a warning (with --mutations they are not the wild type).\n"
        "Natural logarithms throughout, 9 significant digits (float round-trip). The TSV goes to --output or\n"
        "stdout, written only once the flags have been checked. The input is never held whole: a first\n"
        "pass counts records and tokens (for the progress line) keeping nothing, then --chunk records are read,\n"
        "scored and written at a time. See docs/INFERENCE.md.",
};

namespace {

// Whether --track names a bedGraph file: .bedgraph or .bdg, in any case (tr.BEDGRAPH, x.bedGraph).
bool bedgraph_name(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".bedgraph" || ext == ".bdg";
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
  std::snprintf(buf, sizeof buf, "%.9g", v);  // 9 significant digits: any float round-trips
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
  // Flags that do not fit the model or each other are usage errors, before any work or output.
  if (causal) {
    for (const char* f : {"--mutations", "--max-seq-length"})
      if (a.has(f)) a.fail_usage(f, " applies to masked LMs (ESM-2) only");
  } else {
    for (const char* f : {"--track", "--window", "--stride", "--uppercase-labels"})
      if (a.has(f)) a.fail_usage(f, " applies to causal LMs (Llama) only");
  }
  // Variants are scored with the whole wild type as context (as fair-esm and ProteinGym do for a
  // sequence within the model's context); truncating it would silently drop positions' context.
  if (a.has("--mutations") && a.has("--max-seq-length"))
    a.fail_usage("--max-seq-length does not apply with --mutations: every variant is scored with the whole wild type "
                 "as context (a wild type longer than the model's context is an error)");
  check_output_paths(a, {"--output", "--track"});
  const int64_t chunk = a.get_int("--chunk", 1000, 1, int64_t(1) << 30);
  const int64_t max_tokens = a.get_int("--max-tokens", dev == Device::CUDA ? 16384 : 8192, 1, kMaxFlagTokens);
  const UppercaseLabels upper = causal ? uppercase_labels(a, model_dir) : UppercaseLabels{};
  std::unique_ptr<LanguageModel> model = load_model(family, model_dir, dev, precision);
  const Tokenizer& tok = family.tokenizer();
  const int64_t max_pos = model->dims().max_positions;
  infer::CausalOptions causal_o;
  if (causal) {
    const WindowFlags w = window_flags(a, max_pos);
    causal_o.window_tokens = w.window;
    causal_o.stride = w.stride;
  }
  causal_o.uppercase_labels = upper.value;
  // The input is read --chunk records at a time, never whole. A first pass counts the records and
  // sums what the progress line needs (each record's tokens), keeping nothing else.
  // Every record gets its row, empty ones too (with nan scores), so that rows join by position;
  // with --mutations the one non-empty record is the wild type.
  const bool variants = !causal && a.has("--mutations");
  infer::InputStream in = open_input(a, input, family.tokenizer(), /*keep_empty=*/!variants);
  infer::AlphabetReport alphabet = infer::alphabet_report(tok);
  const int64_t esm_len = causal ? 0 : a.get_int("--max-seq-length", std::min<int64_t>(1024, max_pos), 3, kMaxFlagTokens);
  int64_t total_tokens = 0;
  const DatasetStats stats = infer::scan(
      in,
      [&](uint64_t, std::string_view seq) {
        alphabet.add(seq);
        if (seq.empty()) return;  // (a row of nan: nothing to run)
        if (causal) {
          total_tokens += int64_t(seq.size()) + 2;
        } else {
          const int64_t L = std::min<int64_t>(int64_t(seq.size()), esm_len - 2);
          total_tokens += L * (L + 2);
        }
      },
      uint64_t(chunk));
  for (const std::string& w :
       {alphabet.warning(), alphabet.rna_warning(),
        alphabet.unknown_warning(causal     ? "context only, not scored (only A/C/G/T bases are)"
                        : variants ? "context for every variant"
                                   : "context only, left out of pll and of 'scored'"),
        infer::empty_records_warning(stats.skipped_empty, variants ? "not scored"
                                                                   : "not scored; each keeps its row, with nan scores"),
        causal ? lowercase_note(alphabet.lowercase_acgt, upper) : ""})
    if (!w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
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

  if (variants) {
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
                  std::to_string(x.positions) + "\t" + num(data.length(r) ? x.pll : NAN) + "\t" + num(mean) + "\t" + num(std::exp(-mean)) +
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

  infer::CausalOptions o = causal_o;
  const std::string w = infer::length_warning("--window", o.window_tokens, max_pos);
  if (!w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
  o.max_tokens = std::max(max_tokens, o.window_tokens);
  const std::string track_path = a.get("--track");
  o.per_base = !track_path.empty();
  const bool bedgraph = bedgraph_name(track_path);
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
                num(data.length(r) ? x.nll : NAN) + "\t" + num(x.scored > 0 ? x.nll / double(x.scored) : NAN) + "\n");
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
