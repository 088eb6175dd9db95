// biofm embed: hidden states of a model (any family with embed support) for every sequence of
// a file, pooled per sequence and/or per token, from any layers; on the GPU by default, in
// bf16 there. The work is infer/embedder (batching, windows, pooling), infer/input (the input
// read a piece at a time) and infer/shards (streaming output); this file is flags and naming. (biofm eval lives in cmd_eval.cpp.)
//
// Several processes (biofm launch, torchrun, srun, mpirun: the launch_env variables) share one
// job without talking to each other: shard k of the output belongs to rank k mod world size,
// each rank writes its shards (rank r on GPU local_rank unless --device cuda:N says otherwise),
// and the rank that finds every shard on disk when it is done writes index.json.
#include <charconv>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/model_flags.h"
#include "biofm/data/dataset.h"
#include "biofm/data/tokenizer.h"
#include "biofm/dist/launch_env.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/error.h"
#include "biofm/infer/alphabet.h"
#include "biofm/infer/embedder.h"
#include "biofm/infer/input.h"
#include "biofm/infer/npy_output.h"
#include "biofm/infer/shards.h"
#include "biofm/io/utf8.h"
#include "biofm/models/registry.h"

namespace biofm {

const CommandSpec kEmbedSpec{
    .name = "embed",
    .synopsis =
        "--model DIR --input FILE --output OUT.safetensors|DIR [--layers -1] [--pooling mean|cls|last|none]\n"
        "       [--per-token] [--logits] [--device auto] [--precision bf16|fp8|fp32] [--max-tokens N]\n"
        "       [--max-seq-length N | --window N --stride N] [--shard-size N] [--output-format safetensors|npy]\n"
        "       [--format auto] [--column sequence]",
    .summary = "hidden states (pooled or per token, any layers) of an ESM-2 or Llama model",
    .flags =
        {
            {"--model", "DIR", "model directory (config.json + weights)"},
            {"--input", "FILE", "sequences to embed (see above)"},
            {"--output", "OUT", "a .safetensors file, or a directory for shards"},
            {"--layers", "LIST", "comma-separated layers (default: the final states, -1)"},
            {"--pooling", "mean|cls|last|none", "per-sequence pooling (default mean; none: per-token states only; see below)"},
            {"--per-token", "", "also write token_embeddings, input_ids and offsets"},
            {"--logits", "", "with --per-token: also write logits [T, vocab]"},
            device_flag(),
            precision_flag(),
            ops_flag(),
            {"--max-tokens", "N", "tokens per batch (default 16384 on a GPU, 8192 on the CPU)"},
            {"--max-seq-length", "N", "longer sequences are truncated (default 1024, or the model's max positions)"},
            {"--window", "N", "tokens per window: cut long sequences into windows instead (DNA default: the model's context)"},
            {"--stride", "N", "with windows: bases shared by consecutive windows (default 200, or (window - 2) / 2 if smaller)"},
            {"--no-window", "", "DNA models: truncate at --max-seq-length instead of windows"},
            {"--shard-size", "N", "records per piece: read, embedded and written N at a time (a shard with --output DIR; default 10000)"},
            {"--output-format", "safetensors|npy", "safetensors (default) | npy: DIR/embeddings.npy [records, hidden] (one per --layers entry), names.tsv, index.json"},
            {"--progress", "", "print the progress line even when stderr is not a terminal"},
            format_flag(),
            column_flag(),
            name_column_flag(),
            split_flag(),
        },
    .details =
        "Writes 'embeddings' [n, hidden]: per sequence, the mean of the final hidden states over its residues\n"
        "(<cls>/<BOS> and <eos>/<EOS> excluded; --pooling cls / last takes the first / last token instead; with\n"
        "windows, the first window's <cls>/<BOS> / the last window's <eos>/<EOS>, which has seen that window only).\n"
        "--layers 0,16,-1 picks layers as fair-esm's --repr_layers (0 = the embedding output, L = the final\n"
        "states after the last norm, negative counts from the end); each layer K then gives 'embeddings.K'.\n"
        "--per-token (or --pooling none) adds 'token_embeddings' [T, hidden] ('token_embeddings.K'), 'input_ids'\n"
        "[T] and 'offsets' [n+1] (all tokens, specials included); --logits adds 'logits' [T, vocab].\n"
        "Sequence names are in the metadata entry 'names' (a JSON list).\n"
        "Longer sequences are truncated to --max-seq-length tokens (counted and reported), or, with --window\n"
        "(the default for DNA models, at the model's context), cut into windows overlapping by --stride bases\n"
        "whose states are joined: each base from one window (causal models: the first window holding it;\n"
        "bidirectional: each overlap split at its middle). --output DIR writes shard-NNNNN.safetensors files of\n"
        "--shard-size records as they complete plus index.json; the same command after a kill skips the\n"
        "complete shards. --output-format npy writes NumPy arrays instead: DIR/embeddings.npy [n, hidden]\n"
        "(embeddings.K.npy per layer), names.tsv and index.json, filled --shard-size records at a time and\n"
        "resumable the same way. The input is never held whole: a first pass counts its records and tokens (for the\n"
        "progress line's ETA) keeping nothing, then it is read --shard-size records at a time; each piece's sequences\n"
        "are batched longest first under --max-tokens, embedded and written (one .safetensors file gathers them), so\n"
        "memory holds one piece's records and results (one file: every result). Outputs keep input order.\n"
        "--input: a file, a directory, a glob (quote it) or a comma-separated list of these, read in order;\n"
        "fasta, csv, tsv, jsonl or text, each plain, .gz or .zst, or a biofm prepare directory (--split) (docs/DATA.md). See docs/INFERENCE.md.",
};

int cmd_embed(int argc, char** argv) {
  const Flags a = parse_flags(kEmbedSpec, argc, argv);
  if (a.help()) {
    print_help(kEmbedSpec);
    return 0;
  }
  a.expect_no_positional();
  const std::string model_dir = a.require("--model"), input = a.require("--input"), out_path = a.require("--output");
  const std::string out_format = a.get("--output-format", "safetensors");  // (one of its values: parse_flags)
  check_output_paths(a, {"--output"});
  const bool one_file = out_path.size() >= 12 && out_path.compare(out_path.size() - 12, 12, ".safetensors") == 0;
  const DistEnv env = detect_launched_ranks();
  if (env.distributed()) {
    const std::string who = "embed as rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) + " (" + env.source + ")";
    if (out_format == "npy")
      throw UsageError(who + " writes safetensors shards; --output-format npy is for one process");
    if (one_file)
      throw UsageError(who + " needs --output DIR (each rank writes its own shards), not one file " + out_path);
  }
  const std::string device_flag_value = a.get("--device", "auto");
  const Device dev = parse_device(device_flag_value);
  apply_ops_flag(a);
  if (env.distributed() && dev == Device::CUDA && device_flag_value.rfind("cuda:", 0) != 0)
    select_cuda_device(env.local_rank % cuda_device_count());
  const InferencePrecision precision = parse_inference_precision(a.get("--precision"), dev);
  const ModelFamily& family = family_of_dir(model_dir);
  if (!family.embed) fail("embed does not support model_type '", family.hf_model_type, "'");
  const bool causal = family.objective == Objective::CausalLM;
  infer::EmbedOptions o;
  o.pooling = infer::parse_pooling(a.get("--pooling", "mean"));
  o.per_token = a.has("--per-token") || o.pooling == infer::Pooling::None;
  o.logits = a.has("--logits");
  if (o.logits && !o.per_token) a.fail_usage("--logits needs --per-token (or --pooling none)");
  const int64_t shard_size = a.get_int("--shard-size", 10000, 1, int64_t(1) << 40);

  std::unique_ptr<LanguageModel> model = load_model(family, model_dir, dev, precision);
  const Tokenizer& tok = family.tokenizer();
  const int64_t max_pos = model->dims().max_positions, L = model->dims().layers;
  const bool named_layers = a.has("--layers");
  o.layers = parse_layers(a.get("--layers", "-1"), int(L));
  // Windows: asked for, or the default for DNA models (long genomic records are the norm).
  if (a.has("--window") && a.has("--no-window")) a.fail_usage("--window and --no-window exclude each other");
  o.windows = a.has("--window") || (causal && !a.has("--no-window") && !a.has("--max-seq-length"));
  if (o.windows) {
    if (a.has("--max-seq-length")) a.fail_usage("--window and --max-seq-length exclude each other");
    const WindowFlags w = window_flags(a, max_pos);
    o.window_tokens = w.window;
    o.stride = w.stride;
  } else {
    if (a.has("--stride")) a.fail_usage("--stride applies with windows (--window) only");
    // At least one residue between the two special tokens; the limits keep buffers sane.
    o.window_tokens = a.get_int("--max-seq-length", std::min<int64_t>(1024, max_pos), 3, kMaxFlagTokens);
  }
  const std::string len_warn = infer::length_warning(o.windows ? "--window" : "--max-seq-length", o.window_tokens, max_pos);
  if (!len_warn.empty()) std::fprintf(stderr, "%s\n", len_warn.c_str());
  o.act_dtype = precision.params == Precision::F32 ? DType::F32 : DType::BF16;
  o.max_tokens = std::max<int64_t>(a.get_int("--max-tokens", dev == Device::CUDA ? 16384 : 8192, 1, kMaxFlagTokens),
                                   o.window_tokens);

  // Safetensors (one file, or shards in a directory) or NumPy arrays in a directory.
  const bool npy = out_format == "npy";
  if (npy && one_file)
    throw UsageError("--output-format npy writes a directory; --output " + out_path + " names a .safetensors file");
  if (npy && o.per_token)
    throw UsageError("--output-format npy holds one row per record; per-token outputs (--per-token, --pooling none) are ragged: use safetensors");
  // The input is read a piece (--shard-size records) at a time, never whole. A first pass counts
  // the records (the shard layout, the run key and the .npy sizes need the count) and the tokens
  // of each piece (the progress line's ETA), keeping nothing but those counts.
  infer::InputStream in = open_input(a, input, family.tokenizer());
  const int64_t piece = shard_size;
  infer::AlphabetReport alphabet = infer::alphabet_report(tok);
  std::vector<int64_t> piece_tokens;  // tokens each piece feeds the model
  int64_t total_rows = 0;             // per-token rows of all records (one .safetensors file)
  infer::RecordsFingerprint input_fingerprint;
  const DatasetStats stats = infer::scan(
      in,
      [&](uint64_t i, std::string_view seq) {
        alphabet.add(seq);
        const size_t p = size_t(int64_t(i) / piece);
        if (p >= piece_tokens.size()) piece_tokens.resize(p + 1, 0);
        piece_tokens[p] += infer::record_tokens(seq.size(), o);
        if (o.per_token && one_file) total_rows += infer::record_rows(seq.size(), o);
      },
      uint64_t(piece), &input_fingerprint);
  const std::string alpha = alphabet.warning();
  if (!alpha.empty()) std::fprintf(stderr, "%s\n", alpha.c_str());
  const int64_t n = int64_t(stats.records);

  std::string layers_json = "[";
  for (size_t l = 0; l < o.layers.size(); ++l) layers_json += (l ? "," : "") + std::to_string(o.layers[l]);
  layers_json += "]";
  infer::RunKey key("embed");
  key.content("model", model_dir, infer::model_dir_fingerprint(model_dir))
      .content_list("input", input, input_fingerprint.value())
      .add("layers", layers_json).add("named", named_layers)
      .add("pooling", infer::pooling_name(o.pooling)).add("per_token", o.per_token).add("logits", o.logits)
      .add("window", o.window_tokens).add("windows", o.windows).add("stride", o.stride)
      .add("precision", precision.name()).add("records", n);
  std::optional<infer::ShardedOutput> out;
  std::optional<infer::NpyOutput> npy_out;
  if (npy)
    npy_out.emplace(out_path, key, shard_size, n);
  else
    out.emplace(out_path, key, shard_size, n);
  // Output pieces: shards (or .npy rows) of --shard-size records; one file is a single piece on
  // disk, computed --shard-size records at a time and gathered.
  const int64_t chunk = npy ? npy_out->chunk_records() : out->chunk_records();
  // This process's shards (all of them without several ranks) and their work.
  auto mine = [&](int64_t first) { return (first / chunk) % env.world_size == env.rank; };
  auto tokens_of = [&](int64_t first) { return piece_tokens[size_t(first / piece)]; };
  int64_t my_records = 0, total_tokens = 0;
  for (int64_t first = 0; first < n; first += piece) {
    if (!mine(first)) continue;
    my_records += std::min(piece, n - first);
    total_tokens += tokens_of(first);
  }
  infer::Progress progress("embed", my_records, total_tokens, a.has("--progress") || infer::stderr_is_terminal());
  infer::Embedder embedder(*model, tok, o, causal);
  Utf8Cleaner clean_name(input);
  // Tensor names: the historical ones for the default single layer, '.K' per layer otherwise.
  auto name_of = [&](const char* base, size_t l) {
    return named_layers ? std::string(base) + "." + std::to_string(o.layers[l]) : std::string(base);
  };
  const std::string pooling_text =
      o.pooling == infer::Pooling::Mean   ? "mean over residues, first and last (special) tokens excluded"
      : o.pooling == infer::Pooling::Cls  ? "cls: the first token's state"
      : o.pooling == infer::Pooling::Last ? "last: the last token's state"
                                          : "none: per-token states only";
  uint64_t truncated = 0, unknown = 0, windows = 0, resumed = 0;
  int64_t computed_tokens = 0;
  // One .safetensors file: every piece's results gathered in place (the file holds them all).
  const int64_t H = model->dims().hidden, V = model->dims().vocab;
  std::map<std::string, Tensor> gathered;
  std::vector<int32_t> gathered_ids;
  int64_t gathered_rows = 0;
  nlohmann::json all_names = nlohmann::json::array();
  if (one_file) {
    if (o.pooling != infer::Pooling::None)
      for (size_t l = 0; l < o.layers.size(); ++l) gathered[name_of("embeddings", l)] = Tensor::empty({n, H}, DType::F32);
    if (o.per_token) {
      gathered_ids.reserve(size_t(total_rows));
      Tensor off = Tensor::empty({n + 1}, DType::I64);
      off.i64()[0] = 0;
      gathered["offsets"] = off;
      for (size_t l = 0; l < o.layers.size(); ++l)
        gathered[name_of("token_embeddings", l)] = Tensor::empty({total_rows, H}, DType::F32);
      if (o.logits) gathered["logits"] = Tensor::empty({total_rows, V}, DType::F32);
    }
  }
  auto copy_rows = [](Tensor& dst, int64_t row, const Tensor& src) {
    if (src.numel() == 0) return;
    BIOFM_CHECK(dst.dim() == 2 && src.dim() == 2 && dst.size(1) == src.size(1) && row + src.size(0) <= dst.size(0),
                "embed: gathering ", src.describe(), " at row ", row, " of ", dst.describe());
    std::memcpy(dst.f32() + row * dst.size(1), src.f32(), size_t(src.numel()) * sizeof(float));
  };
  // .npy output: names.tsv written as the pieces go by (done ones included: every piece is read).
  std::unique_ptr<infer::NamesTsv> names_tsv = npy ? std::make_unique<infer::NamesTsv>(out_path) : nullptr;
  SequenceDataset part;  // the records of the piece at hand
  auto expect = [&](uint64_t got, int64_t count) {
    if (int64_t(got) != count)
      fail("embed: ", input, " ended after ", in.position(), " records; the first pass counted ", n,
           " (did it change during the run?)");
  };
  for (int64_t first = 0; first < n; first += piece) {
    const int64_t count = std::min(piece, n - first);
    const bool done = !one_file && mine(first) && (npy ? npy_out->have(first, count) : out->have(first, count));
    if (!mine(first) || (done && !npy)) {
      expect(in.skip(uint64_t(count)), count);  // another rank's, or on disk: not kept
    } else {
      expect(in.read(uint64_t(count), part), count);
      if (names_tsv)
        for (int64_t i = 0; i < count; ++i) names_tsv->add(clean_name(part.name(uint64_t(i))));
    }
    if (!mine(first)) continue;
    if (done) {
      progress.skip(count, tokens_of(first));
      resumed += uint64_t(count);
      continue;
    }
    infer::EmbedResult r = embedder.run(part, 0, uint64_t(count), &progress);
    truncated += r.truncated;
    unknown += r.unknown;
    windows += r.windows;
    computed_tokens += r.tokens;
    if (one_file) {
      for (size_t l = 0; l < r.pooled.size(); ++l) copy_rows(gathered[name_of("embeddings", l)], first, r.pooled[l]);
      if (o.per_token) {
        for (size_t l = 0; l < r.token_states.size(); ++l)
          copy_rows(gathered[name_of("token_embeddings", l)], gathered_rows, r.token_states[l]);
        if (o.logits) copy_rows(gathered["logits"], gathered_rows, r.logits);
        gathered_ids.insert(gathered_ids.end(), r.ids.begin(), r.ids.end());
        for (int64_t i = 1; i <= count; ++i) gathered["offsets"].i64()[first + i] = gathered_rows + r.offsets[size_t(i)];
        gathered_rows += int64_t(r.ids.size());
      }
      for (int64_t i = 0; i < count; ++i) all_names.push_back(clean_name(part.name(uint64_t(i))));
      continue;
    }
    std::map<std::string, Tensor> tensors;
    for (size_t l = 0; l < r.pooled.size(); ++l) tensors[name_of("embeddings", l)] = r.pooled[l];
    if (o.per_token) {
      const int64_t T = int64_t(r.ids.size());
      tensors["input_ids"] = Tensor::from_i32({T}, r.ids);
      Tensor off = Tensor::empty({count + 1}, DType::I64);
      for (int64_t i = 0; i <= count; ++i) off.i64()[i] = r.offsets[size_t(i)];
      tensors["offsets"] = off;
      for (size_t l = 0; l < r.token_states.size(); ++l) tensors[name_of("token_embeddings", l)] = r.token_states[l];
      if (o.logits) tensors["logits"] = r.logits;
    }
    if (npy) {
      npy_out->write(first, count, tensors);
      continue;
    }
    nlohmann::json names = nlohmann::json::array();
    for (int64_t i = 0; i < count; ++i) names.push_back(clean_name(part.name(uint64_t(i))));
    // The shard's own counts, so that index.json can sum them whichever run or rank wrote it.
    out->write(first, count, tensors, names.dump(),
               {{"pooling", pooling_text},
                {"layers", layers_json},
                {"truncated", std::to_string(r.truncated)},
                {"unknown_residues", std::to_string(r.unknown)},
                {"windows", std::to_string(r.windows)}});
  }
  part = SequenceDataset();
  if (one_file) {
    if (o.per_token) {
      BIOFM_CHECK(gathered_rows == total_rows, "embed: ", gathered_rows, " per-token rows, the first pass counted ", total_rows);
      gathered["input_ids"] = Tensor::from_i32({gathered_rows}, gathered_ids);
      gathered_ids = {};
    }
    out->write(0, n, gathered, all_names.dump(),
               {{"pooling", pooling_text},
                {"layers", layers_json},
                {"truncated", std::to_string(truncated)},
                {"unknown_residues", std::to_string(unknown)},
                {"windows", std::to_string(windows)}});
    gathered.clear();
  }
  progress.finish();
  const double seconds = progress.seconds();
  nlohmann::json summary = {{"model", model_dir},
                                  {"input", input},
                                  {"num_records", n},
                                  {"layers", nlohmann::json::parse(layers_json)},
                                  {"pooling", infer::pooling_name(o.pooling)},
                                  {"truncated", truncated},
                                  {"unknown_residues", unknown},
                                  {"windows", windows},
                                  {"resumed_records", resumed}};
  // A shard directory's index counts every shard, whichever run or rank computed it, from the
  // counts each shard keeps in its metadata (null where a shard from an older version lacks them).
  // With several ranks it is written once every shard is on disk, by whichever rank sees that.
  bool wrote_index = true;
  int64_t missing = 0;
  if (!npy && !out->single_file()) {
    if (env.distributed()) {
      summary["ranks"] = env.world_size;
      summary.erase("resumed_records");  // one rank's view only
    }
    for (const char* key : {"truncated", "unknown_residues", "windows"}) summary[key] = 0;
    for (int64_t first = 0; first < n; first += chunk) {
      std::map<std::string, std::string> m;
      if (!out->have(first, std::min(chunk, n - first), &m)) {
        ++missing;
        continue;
      }
      for (const char* key : {"truncated", "unknown_residues", "windows"}) {
        if (!m.count(key) || summary[key].is_null()) {
          summary[key] = nullptr;
          continue;
        }
        int64_t v = 0;
        const std::string& text = m.at(key);
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || ptr != text.data() + text.size())
          fail(out->shard_path(first), ": metadata '", key, "' is not a count: '", text, "'");
        summary[key] = summary[key].get<int64_t>() + v;
      }
    }
    wrote_index = missing == 0;
    if (missing > 0 && !env.distributed()) fail("embed: ", missing, " shard(s) missing after the run");
  }
  const std::string summary_text = summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!wrote_index) {
    std::fprintf(stderr,
                 "rank %d of %d: %lld of %lld shards are not on disk yet (other ranks); the rank that finishes last "
                 "writes index.json (running any rank's command again writes it once all shards exist)\n",
                 env.rank, env.world_size, (long long)missing, (long long)((n + chunk - 1) / chunk));
  } else if (npy) {
    names_tsv->commit();
    npy_out->finish(summary_text);
  } else {
    out->finish(summary_text);
  }
  if (env.distributed())
    std::printf("rank %d of %d: %lld of %lld records in its shards (%s); ", env.rank, env.world_size,
                (long long)my_records, (long long)n,
                wrote_index ? "all shards done: wrote index.json" : "index.json follows from the last rank to finish");
  std::printf("embedded %s (hidden %lld, %s, %s) -> %s", stats.summary().c_str(),
              (long long)model->dims().hidden, device_name(dev), precision.name(), out_path.c_str());
  if (o.windows)
    std::printf(" | %llu windows of %lld tokens (stride %lld)", (unsigned long long)windows,
                (long long)o.window_tokens, (long long)o.stride);
  else
    std::printf(" | %llu truncated to %lld tokens", (unsigned long long)truncated, (long long)o.window_tokens);
  std::printf(", %llu unknown residues, %llu empty records skipped", (unsigned long long)unknown,
              (unsigned long long)stats.skipped_empty);
  if (resumed) std::printf(", %llu records from complete shards of an earlier run", (unsigned long long)resumed);
  // Throughput of the embedding itself (after the model is loaded and the input counted; reading
  // the pieces and writing the output included): what bench/embed_vs_hf.sh reads.
  std::printf(" | %lld records in %.3f s: %.1f records/s, %.0f tokens/s\n", (long long)(my_records - int64_t(resumed)), seconds,
              double(my_records - int64_t(resumed)) / std::max(seconds, 1e-9), double(computed_tokens) / std::max(seconds, 1e-9));
  if (truncated)
    std::fprintf(stderr, "warning: %llu of %lld records were truncated to %lld tokens (--window N cuts them into windows instead)\n",
                 (unsigned long long)truncated, (long long)my_records, (long long)o.window_tokens);
  return 0;
}

}  // namespace biofm
