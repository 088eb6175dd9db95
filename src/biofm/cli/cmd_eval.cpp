// biofm eval: language-model loss of a model over a sequence file, as JSON.
//
// ESM-2 (model_type esm): masked-LM loss / accuracy / perplexity with deterministic 15%
// masking (80/10/10) drawn from --seed.
//
// Llama (model_type llama), as the OpenGenome2 recipe's evaluate_fasta_lm_loss does:
// per-sequence mean negative log-likelihood of next-token prediction over A/C/G/T targets
// (either case; degenerate bases, <BOS> and <EOS> are not scored). A sequence longer than
// one window is cut into windows of --window tokens (or --max-seq-length, the older name; <BOS> and
// <EOS> included; default the model's max_position_embeddings)
// overlapping by --stride bases, exactly as training windows (data/causal.h); every base is
// scored once, in the first window that predicts it, so the bases of an overlap are scored
// in the earlier window and serve only as context in the later one. Aggregates:
// loss = Σ NLL / Σ scored tokens, perplexity = exp(loss), and mean_sequence_nll = the mean of
// the per-sequence means.
//
// Hidden option (not in --help; for tools/check_llama_export.py): --dump-logits OUT.safetensors
// writes, for a Llama model, every window's logits [T,V] (F32) with input_ids [T], labels [T]
// (-100 where not scored), token_losses [T], window_offsets [W+1] (I64, first row of each
// window), window_record [W] and window_start [W] (I64: record index and first base).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "biofm/cli/commands.h"
#include "biofm/train/metrics.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/model_flags.h"
#include "biofm/core/device_memory.h"
#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/data/pack.h"
#include "biofm/data/tokenizer.h"
#include "biofm/infer/alphabet.h"
#include "biofm/infer/input.h"
#include "biofm/infer/progress.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/utf8.h"
#include "biofm/io/safetensors.h"
#include "biofm/models/registry.h"

namespace biofm {

const CommandSpec kEvalSpec{
    .name = "eval",
    .synopsis =
        "--model DIR --input FILE [--output OUT.json] [--device auto] [--precision bf16|fp8|fp32] [--max-tokens N]\n"
        "       [--max-seq-length N] [--window N --stride N] [--format auto] [--column sequence]",
    .summary = "ESM-2: masked-LM loss, accuracy, perplexity; Llama: next-token NLL over A/C/G/T",
    .flags = {
        {"--model", "DIR", "model directory (config.json + weights)"},
        {"--input", "FILE", "sequences to evaluate (see above)"},
        {"--output", "OUT", "also write the JSON to OUT"},
        device_flag(),
        precision_flag(),
        ops_flag(),
        {"--max-tokens", "N", "tokens per batch (default 16384 on a GPU, 8192 on the CPU; at least --max-seq-length)"},
        {"--max-seq-length", "N", "tokens per sequence (esm) or window (llama, as --window); default 1024 (esm), max positions (llama)"},
        {"--window", "N", "llama: tokens per window (as in score and embed; default: the model's max_position_embeddings)"},
        {"--progress", "", "print the progress line even when stderr is not a terminal"},
        {"--seed", "N", "esm: masking seed (default 1234)"},
        {"--stride", "N", "llama: bases shared by consecutive windows (default 200, or (window - 2) / 2 if smaller)"},
        uppercase_labels_flag(),
        format_flag(),
        column_flag(),
        name_column_flag(),
        split_flag(),
        {"--chunk", "N", "records read from --input at a time (bounds memory; default 10000; results do not depend on it)",
         /*hidden=*/true},
        {"--dump-logits", "OUT", "llama: every window's logits as safetensors", /*hidden=*/true},
    },
    .details =
        "ESM-2 models (model_type esm): masks 15% of residues (80/10/10) deterministically from --seed 1234\n"
        "and reports the masked-LM loss, accuracy and perplexity (--max-seq-length default 1024; longer\n"
        "sequences are truncated and counted in num_truncated).\n"
        "Llama models (model_type llama): per-sequence mean next-token NLL over A/C/G/T targets, long\n"
        "sequences in windows of --window tokens (--max-seq-length is the same; default: the model's\n"
        "max_position_embeddings) overlapping by --stride bases (default 200, or (window - 2) / 2 if smaller), every base\n"
        "scored once; reports loss = total NLL / scored tokens, perplexity = exp(loss), mean_sequence_nll\n"
        "and a 'sequences' list {name, length, num_scored, mean_nll}, one entry per input record in order (an empty\n"
        "record's: length 0, mean_nll null). Lowercase a/c/g/t targets are scored as A/C/G/T when the model was\n"
        "trained so (its config.json's biofm_uppercase_labels) or --uppercase-labels true.\n"
        "Residues outside the model's alphabet (read as <unk>) are context only, never masked or scored; they\n"
        "are counted (unknown_residues) and warned about, as are empty records (skipped_empty_records).\n"
        "The JSON goes to stdout and, with --output, to a file. The input is read a piece at a time after a first\n"
        "pass that counts it, never held whole (Llama: the per-sequence list is kept for the report).\n"
        "--input: a file, a directory, a glob (quote it) or a comma-separated list of these, read in order;\n"
        "fasta, csv, tsv, jsonl or text, each plain, .gz or .zst, or a biofm prepare directory (--split) (docs/DATA.md).",
};

namespace {

void emit(const Flags& a, const nlohmann::json& r) {
  // Paths and names are cleaned where they enter; replace anything else rather than throw.
  std::string text = r.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (a.has("--output")) write_file_atomic(a.get("--output"), text);
  std::fputs(text.c_str(), stdout);
}

// Warnings that the numbers may not mean what they seem (stderr).
void warn_inputs(const infer::AlphabetReport& alphabet, const std::string& unknown_then, uint64_t skipped_empty,
                 const std::string& empty_then, const char* flag, int64_t tokens, int64_t max_positions) {
  for (const std::string& w :
       {alphabet.warning(), alphabet.unknown_warning(unknown_then), alphabet.rna_warning(),
        infer::empty_records_warning(skipped_empty, empty_then),
        infer::length_warning(flag, tokens, max_positions)})
    if (!w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
}

// The input is read a piece of --chunk records at a time (infer/input.h), never whole.
uint64_t input_piece(const Flags& a) { return uint64_t(a.get_int("--chunk", 10000, 1, int64_t(1) << 30)); }

int64_t default_max_tokens(Device dev) { return dev == Device::CUDA ? 16384 : 8192; }

int eval_masked_lm(const Flags& a, Device dev, InferencePrecision precision, const ModelFamily& family) {
  std::unique_ptr<LanguageModel> model = load_model(family, a.require("--model"), dev, precision);
  const uint64_t piece = input_piece(a);
  infer::InputStream in = open_input(a, a.require("--input"), family.tokenizer());
  MlmOptions o;
  o.max_seq_length =
      a.get_int("--max-seq-length", std::min<int64_t>(1024, model->dims().max_positions), 3, kMaxFlagTokens);
  o.max_tokens_per_batch =
      std::max<int64_t>(a.get_int("--max-tokens", default_max_tokens(dev), 1, kMaxFlagTokens), o.max_seq_length);
  // A first pass: the record count, the tokens for the progress line, the truncations (the batcher
  // truncates to max_seq_length tokens, <cls> and <eos> included), the alphabet; nothing kept.
  infer::AlphabetReport alphabet = infer::alphabet_report(family.tokenizer());
  uint64_t truncated = 0;
  int64_t total_tokens = 0;
  const DatasetStats stats = infer::scan(
      in,
      [&](uint64_t, std::string_view seq) {
        alphabet.add(seq);
        truncated += int64_t(seq.size()) + 2 > o.max_seq_length;
        total_tokens += std::min<int64_t>(int64_t(seq.size()) + 2, o.max_seq_length);
      },
      piece);
  warn_inputs(alphabet, "never masked, context only", stats.skipped_empty,
              "not evaluated (counted in skipped_empty_records)", "--max-seq-length", o.max_seq_length,
              model->dims().max_positions);
  infer::Progress progress("eval", int64_t(stats.records), total_tokens,
                           a.has("--progress") || infer::stderr_is_terminal());
  o.eval_seed = uint64_t(a.get_int("--seed", 1234, 0, INT64_MAX));
  o.shuffle = false;
  validate(o);
  // Records asked for in file order, read a piece at a time: the batches, masks and numbers are
  // those of the whole input in memory.
  const infer::StreamedCorpus data(in, stats.records, piece, stats.summary());
  MlmBatcher batcher(data, o, family.tokenizer());
  Batch b;
  LossSums total;
  int64_t sequences = 0;
  while (batcher.next_eval(b)) {
    LossSums s = model->evaluate(b.to(dev), true);
    total.loss_sum += s.loss_sum;
    total.num_tokens += s.num_tokens;
    total.num_correct += s.num_correct;
    sequences += b.num_sequences();
    progress.add(b.num_sequences(), b.num_real_tokens);
  }
  progress.finish();
  if (truncated)
    std::fprintf(stderr, "warning: %llu of %llu sequences were truncated to %lld tokens (--max-seq-length)\n",
                 (unsigned long long)truncated, (unsigned long long)stats.records, (long long)o.max_seq_length);
  if (total.num_tokens == 0) fail("no residues were masked in '", a.require("--input"), "' (sequences too short?)");
  const double loss = total.loss_sum / double(total.num_tokens);
  nlohmann::json r = {{"model", a.require("--model")},
                      {"input", a.require("--input")},
                      {"num_sequences", sequences},
                      {"num_masked_tokens", total.num_tokens},
                      {"loss", loss},
                      {"perplexity", perplexity_of(loss)},
                      {"accuracy", double(total.num_correct) / double(total.num_tokens)},
                      {"mask_seed", o.eval_seed},
                      {"max_seq_length", o.max_seq_length},
                      {"num_truncated", truncated},
                      {"unknown_residues", alphabet.unknown.residues},
                      {"device", device_name(dev)},
                      {"precision", precision.name()},
                      {"skipped_empty_records", stats.skipped_empty},
                      {"input_files", stats.files},
                      {"skipped_input_files", stats.skipped_files}};
  emit(a, r);
  return 0;
}

int eval_causal_lm(const Flags& a, Device dev, InferencePrecision precision, const ModelFamily& family) {
  const std::string model_dir = a.require("--model"), input = a.require("--input");
  const UppercaseLabels upper = uppercase_labels(a, model_dir);
  std::unique_ptr<LanguageModel> model = load_model(family, model_dir, dev, precision);
  const uint64_t piece = input_piece(a);
  // Empty records are read too: each has its entry in the 'sequences' list (length 0, mean_nll
  // null), so that the list follows the input record by record.
  infer::InputStream in = open_input(a, input, family.tokenizer(), /*keep_empty=*/true);
  // Windows as long as the model's context unless asked otherwise (longer ones warn).
  const WindowFlags win = window_flags(a, model->dims().max_positions);
  const int64_t max_len = win.window, stride = win.stride;
  const char* window_flag = win.flag;
  const int64_t max_tokens = std::max<int64_t>(a.get_int("--max-tokens", default_max_tokens(dev), 1, kMaxFlagTokens), max_len);
  // A first pass: the record count and the alphabet; nothing kept.
  infer::AlphabetReport alphabet = infer::alphabet_report(family.tokenizer());
  const DatasetStats stats = infer::scan(
      in,
      [&](uint64_t, std::string_view seq) {
        alphabet.add(seq);
      },
      piece);
  warn_inputs(alphabet, "context only, not scored (only A/C/G/T bases are)", stats.skipped_empty,
              "not evaluated (counted in skipped_empty_records; listed in 'sequences' with mean_nll null)", window_flag, max_len, model->dims().max_positions);
  if (const std::string note = lowercase_note(alphabet.lowercase_acgt, upper); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  const std::string dump_path = a.get("--dump-logits");

  const uint64_t n = stats.records;
  // Records in file order, read a piece at a time. What the report lists per sequence (its
  // name, length and sums) is all that is kept of each.
  const infer::StreamedCorpus data(in, n, piece, stats.summary());
  std::vector<double> nll(n, 0.0);
  std::vector<int64_t> scored(n, 0);
  std::vector<uint64_t> lengths(n, 0);
  std::string names;              // every record's name (cleaned), back to back
  std::vector<uint64_t> name_end(n, 0);
  Utf8Cleaner clean_name(input);
  int64_t num_windows = 0;
  // For --dump-logits.
  std::vector<float> d_logits, d_losses;
  std::vector<int32_t> d_ids, d_labels;
  std::vector<int64_t> d_offsets{0}, d_record, d_start;

  const Tokenizer& tok = family.tokenizer();
  BatchBuilder builder;
  std::vector<uint64_t> members;  // record of each window in the builder
  auto flush = [&]() {
    if (builder.num_sequences() == 0) return;
    Batch b = builder.build(BatchMode::Thd, 1, tok.pad_id());
    Batch db = b.to(dev);
    Tensor losses = model->token_losses(db).to(Device::CPU).to(DType::F32);
    for (size_t s = 0; s < members.size(); ++s) {
      const int64_t start = b.cu_seqlens.i32()[s], len = b.seq_lens.i32()[s];
      for (int64_t t = start; t < start + len; ++t) {
        if (b.labels.i32()[t] == kIgnoreLabel) continue;
        nll[members[s]] += losses.f32()[t];
        scored[members[s]] += 1;
      }
    }
    if (!dump_path.empty()) {
      Tensor lg = model->logits(db).to(Device::CPU).to(DType::F32);
      d_logits.insert(d_logits.end(), lg.f32(), lg.f32() + lg.numel());
      d_losses.insert(d_losses.end(), losses.f32(), losses.f32() + losses.numel());
      d_ids.insert(d_ids.end(), b.input_ids.i32(), b.input_ids.i32() + b.num_rows());
      d_labels.insert(d_labels.end(), b.labels.i32(), b.labels.i32() + b.num_rows());
      for (size_t s = 0; s < members.size(); ++s) d_offsets.push_back(d_offsets.back() + b.seq_lens.i32()[s]);
    }
    builder.clear();
    members.clear();
  };
  std::vector<int32_t> ids, labels;
  for (uint64_t r = 0; r < n; ++r) {
    names += clean_name(data.name(r));
    name_end[r] = names.size();
    const std::string_view seq = data.sequence(r);
    lengths[r] = seq.size();
    const std::vector<Window> windows = make_windows(seq.size(), max_len, stride);
    uint64_t scored_until = 0;  // bases [0, scored_until) are scored in earlier windows
    for (const Window& w : windows) {
      ids.clear();
      ids.push_back(tok.begin_id());
      tok.encode_residues(seq.substr(size_t(w.start), size_t(w.length)), ids);
      ids.push_back(tok.end_id());
      causal_labels(ids, labels, /*genomic_masking=*/true, upper.value);
      // labels[t] predicts base w.start + t (t < w.length); drop those scored already.
      for (uint64_t t = 0; t < w.length && w.start + t < scored_until; ++t) labels[size_t(t)] = kIgnoreLabel;
      scored_until = w.start + w.length;
      if (builder.num_tokens() + int64_t(ids.size()) > max_tokens) flush();
      builder.add(ids.data(), labels.data(), int64_t(ids.size()));
      members.push_back(r);
      d_record.push_back(int64_t(r));
      d_start.push_back(int64_t(w.start));
      ++num_windows;
    }
  }
  flush();

  double total_nll = 0, seq_mean_sum = 0;
  int64_t total_scored = 0, seqs_scored = 0;
  nlohmann::json per_seq = nlohmann::json::array();
  for (uint64_t r = 0; r < n; ++r) {
    total_nll += nll[r];
    total_scored += scored[r];
    const uint64_t name_begin = r ? name_end[r - 1] : 0;
    nlohmann::json e = {{"name", names.substr(size_t(name_begin), size_t(name_end[r] - name_begin))},
                        {"length", lengths[r]},
                        {"num_scored", scored[r]},
                        {"mean_nll", nullptr}};
    if (scored[r] > 0) {
      const double m = nll[r] / double(scored[r]);
      e["mean_nll"] = m;
      seq_mean_sum += m;
      ++seqs_scored;
    }
    per_seq.push_back(e);
  }
  if (total_scored == 0) fail("no A/C/G/T bases to score in '", input, "'");
  const double loss = total_nll / double(total_scored);
  nlohmann::json r = {{"model", model_dir},
                      {"input", input},
                      {"model_type", family.hf_model_type},
                      {"max_seq_length", max_len},
                      {"stride", stride},
                      {"uppercase_labels", upper.value},
                      {"unscored_u_bases", alphabet.rna_u},
                      {"device", device_name(dev)},
                      {"precision", precision.name()},
                      {"num_sequences", n - stats.skipped_empty},  // (evaluated: the non-empty records)
                      {"num_windows", num_windows},
                      {"num_scored_tokens", total_scored},
                      {"unknown_residues", alphabet.unknown.residues},
                      {"loss", loss},
                      {"perplexity", perplexity_of(loss)},
                      {"mean_sequence_nll", seq_mean_sum / double(std::max<int64_t>(1, seqs_scored))},
                      {"skipped_empty_records", stats.skipped_empty},
                      {"input_files", stats.files},
                      {"skipped_input_files", stats.skipped_files},
                      {"sequences", per_seq}};
  if (!dump_path.empty()) {
    const int64_t T = int64_t(d_ids.size()), V = model->dims().vocab;
    auto i64 = [](const std::vector<int64_t>& v) {
      Tensor t = Tensor::empty({int64_t(v.size())}, DType::I64);
      for (size_t i = 0; i < v.size(); ++i) t.i64()[i] = v[i];
      return t;
    };
    write_safetensors(dump_path,
                      {{"logits", Tensor::from_f32({T, V}, d_logits)},
                       {"input_ids", Tensor::from_i32({T}, d_ids)},
                       {"labels", Tensor::from_i32({T}, d_labels)},
                       {"token_losses", Tensor::from_f32({T}, d_losses)},
                       {"window_offsets", i64(d_offsets)},
                       {"window_record", i64(d_record)},
                       {"window_start", i64(d_start)}},
                      {{"max_seq_length", std::to_string(max_len)}, {"stride", std::to_string(stride)}});
  }
  emit(a, r);
  return 0;
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  const Flags a = parse_flags(kEvalSpec, argc, argv);
  if (a.help()) {
    print_help(kEvalSpec);
    return 0;
  }
  a.expect_no_positional();
  require_one_process("eval");
  const std::string model_dir = a.require("--model");
  (void)a.require("--input");  // usage errors before any work
  check_output_paths(a, {"--output", "--dump-logits"});
  const Device dev = parse_device(a.get("--device", "auto"));
  apply_ops_flag(a);
  const InferencePrecision precision = parse_inference_precision(a.get("--precision"), dev);
  const ModelFamily& family = family_of_dir(model_dir);
  if (!family.eval) fail("eval does not support model_type '", family.hf_model_type, "'");
  // Flags that do not fit the model or each other are usage errors (exit 2), before any work.
  if (family.objective == Objective::MaskedLM) {
    for (const char* f : {"--window", "--stride", "--dump-logits", "--uppercase-labels"})
      if (a.has(f)) a.fail_usage(f, " applies to causal LMs (Llama) only");
    return eval_masked_lm(a, dev, precision, family);
  }
  if (a.has("--seed")) a.fail_usage("--seed applies to masked-LM masking only (causal LM evaluation is deterministic)");
  if (a.has("--window") && a.has("--max-seq-length"))
    a.fail_usage("--window and --max-seq-length both set the window of a causal LM; give one");
  return eval_causal_lm(a, dev, precision, family);
}

}  // namespace biofm
