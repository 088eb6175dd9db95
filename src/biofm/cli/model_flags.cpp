#include "biofm/cli/model_flags.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <new>
#include <sstream>

#include "biofm/core/device_memory.h"
#include "biofm/core/error.h"
#include "biofm/data/input_files.h"
#include "biofm/data/prepared.h"
#include "biofm/dist/launch_env.h"
#include "biofm/io/config.h"
#include "biofm/models/uppercase_labels.h"
#include "biofm/train/config.h"
#include "biofm/train/setup.h"

namespace biofm {

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::CPU;
  if (s == "auto") return cuda_available() ? Device::CUDA : Device::CPU;
  if (s == "cuda") {
    if (!cuda_available()) fail("--device cuda: no CUDA backend or GPU available");
    return Device::CUDA;
  }
  if (s.rfind("cuda:", 0) == 0) {
    int n = -1;
    const char* first = s.data() + 5;
    const char* last = s.data() + s.size();
    const auto [ptr, ec] = std::from_chars(first, last, n);
    if (ec != std::errc() || ptr != last || first == last || n < 0)
      usage_fail("--device '", s, "': expected cuda:N with N a GPU index (0, 1, ...)");
    const int count = cuda_device_count();
    if (n >= count) fail("--device ", s, ": this process sees ", count, " GPU(s)");
    select_cuda_device(n);
    return Device::CUDA;
  }
  usage_fail("--device must be auto, cpu, cuda or cuda:N, got '", s, "'");
}

InferencePrecision parse_inference_precision(const std::string& s, Device dev) {
  if (s.empty()) return {dev == Device::CUDA ? Precision::Bf16 : Precision::F32, false};
  if (s == "fp32") return {Precision::F32, false};
  if (s == "bf16" || s == "fp8") {
    if (dev != Device::CUDA) fail("--precision ", s, " needs a GPU (the CPU backend computes in fp32)");
    // FP8 tensor cores: Ada (8.9) and Hopper (9.0) on; below, every GEMM would quantize for nothing
    // and fall back to bf16.
    const int cc = s == "fp8" ? cuda_compute_capability() : 0;
    if (s == "fp8" && cc < 89)
      fail("--precision fp8 needs a GPU with FP8 tensor cores (compute capability 8.9 or newer); this one is ",
           cc / 10, ".", cc % 10);
    return {Precision::Bf16, s == "fp8"};
  }
  throw UsageError("--precision must be bf16, fp8 or fp32, got '" + s + "'");
}

FlagSpec device_flag() {
  return {"--device", "D", "auto | cpu | cuda | cuda:N (default auto: the GPU when there is one)"};
}

FlagSpec precision_flag(bool with_fp8) {
  if (!with_fp8) return {"--precision", "P", "bf16 | fp32 (default bf16 on a GPU, fp32 on the CPU)"};
  return {"--precision", "P", "bf16 | fp8 | fp32 (default bf16 on a GPU, fp32 on the CPU; fp8: FP8 projections)"};
}

FlagSpec ops_flag() {
  return {"--ops", "LIST", "op settings KEY=VALUE,... (the configs' ops.* keys, e.g. sdpa_autotune=true)"};
}

void apply_ops_flag(const Flags& f) {
  const std::string list = f.get("--ops");
  if (list.empty()) return;
  std::vector<std::string> overrides;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    const size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? std::string() : item.substr(first, last - first + 1);
    if (item.empty()) continue;
    if (item.rfind("ops.", 0) != 0) item = "ops." + item;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw UsageError("--ops: '" + item + "' is not KEY=VALUE");
    if (item.find('.', 4) < eq) throw UsageError("--ops takes the ops.* keys only, got '" + item.substr(0, eq) + "'");
    overrides.push_back(item);
  }
  try {
    const config::Config c = config::load_string(train_config_schema(), "{}", overrides);
    const std::vector<std::string> problems = c.check_ranges();
    if (!problems.empty()) throw UsageError("--ops: " + problems.front());
    apply_op_options(train_config_from(c));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string("--ops: ") + e.what());
  }
}

std::unique_ptr<LanguageModel> load_model(const ModelFamily& family, const std::string& dir, Device dev,
                                          InferencePrecision p) {
  try {
    BuildOptions o;
    o.precision = p.params;
    std::unique_ptr<LanguageModel> m = family.load(dir, dev, o);
    m->params().release_gradients();  // inference only: no backward state
    if (p.fp8) {
      ops::LayerQuant fp8;  // Float8CurrentScaling, E4M3 (the forward's type)
      fp8.format = ops::LayerFormat::Fp8;
      m->set_layer_quant(std::vector<ops::LayerQuant>(size_t(m->dims().layers), fp8));
    }
    return m;
  } catch (const std::bad_alloc&) {
    fail(dir, ": not enough memory for this model (check the sizes in its config.json)");
  }
}

FlagSpec format_flag() {
  return {"--format", "F", "input format: auto (from each file's extension) | fasta | csv | tsv | jsonl | parquet | text"};
}

FlagSpec column_flag() {
  return {"--column", "NAME", "csv/tsv/parquet column or jsonl field holding the sequence (default sequence)"};
}

FlagSpec name_column_flag() {
  return {"--name-column", "NAME", "csv/tsv/parquet column or jsonl field naming each record (default: record:<index>)"};
}

WindowFlags window_flags(const Flags& a, int64_t max_pos) {
  WindowFlags w;
  if (!a.has("--window") && a.has("--max-seq-length")) w.flag = "--max-seq-length";
  w.window = a.get_int(w.flag, max_pos, 3, kMaxFlagTokens);
  w.stride = a.get_int("--stride", std::min<int64_t>(200, (w.window - 2) / 2), 0, kMaxFlagTokens);
  if (w.stride >= w.window - 2)
    a.fail_usage("--stride (", w.stride, ") must lie in [0, ", w.flag, " - 2 = ", w.window - 2,
                 "): consecutive windows must share fewer bases than a window holds",
                 a.has(w.flag) ? "" : " (the window is the model's max_position_embeddings; --window sets it)");
  return w;
}

FlagSpec uppercase_labels_flag() {
  return {"--uppercase-labels", "true|false",
          "llama: score a/c/g/t as A/C/G/T (default: as the model was trained, if its config.json says; else false)"};
}

UppercaseLabels uppercase_labels(const Flags& a, const std::string& model_dir) {
  if (a.has("--uppercase-labels")) {
    const std::string v = a.get("--uppercase-labels");
    if (v != "true" && v != "false") a.fail_usage("--uppercase-labels takes true or false, got '", v, "'");
    return {v == "true", "--uppercase-labels"};
  }
  if (const std::optional<bool> r = recorded_uppercase_labels(model_dir)) return {*r, "the model's config.json"};
  return {false, "the default"};
}

std::string lowercase_note(uint64_t lowercase, const UppercaseLabels& u) {
  if (lowercase == 0 || u.value) return "";
  std::string why = "the model's config.json does not say how it was trained";
  if (u.source == "--uppercase-labels") why = "--uppercase-labels false";
  if (u.source == "the model's config.json") why = "the model's config.json: trained so";
  return "note: " + std::to_string(lowercase) +
         " lowercase (soft-masked) a/c/g/t bases are scored as their own tokens, not as A/C/G/T (" + why +
         "); a model trained with dataset.uppercase_labels=true needs --uppercase-labels true";
}

void check_output_paths(const Flags& a, const std::vector<const char*>& output_flags) {
  namespace fs = std::filesystem;
  const auto canon = [](const std::string& p) {
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(fs::absolute(p, ec), ec);
    return ec ? fs::path(p).lexically_normal() : c;
  };
  std::vector<std::pair<const char*, fs::path>> outs;
  for (const char* f : output_flags)
    if (a.has(f) && !a.get(f).empty()) outs.push_back({f, canon(a.get(f))});
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t j = i + 1; j < outs.size(); ++j)
      if (outs[i].second == outs[j].second)
        a.fail_usage(outs[i].first, " and ", outs[j].first, " name the same file (", a.get(outs[i].first), ")");
  if (outs.empty() || !a.has("--input")) return;
  std::vector<std::string> inputs;
  try {
    inputs = expand_inputs(a.get("--input")).files;
  } catch (const Error&) {
    return;  // (a missing or unreadable input is the reader's to name)
  }
  for (const std::string& in : inputs)
    for (const auto& [flag, out] : outs)
      if (canon(in) == out)
        a.fail_usage(flag, " names an input file (", in, "): writing it would replace the data it reads");
}

FlagSpec split_flag() {
  return {"--split", "train|val|test", "when --input is a biofm prepare directory: its split (default train)"};
}

void note_unused_column_flags(const Flags& f, const std::string& input) {
  if (!f.has("--column") && !f.has("--name-column")) return;
  std::string what;  // what the input is, when none of it has columns
  if (is_prepared_dir(input)) {
    what = input + " is a prepared directory (its records were read by biofm prepare)";
  } else {
    InputFiles inputs;
    try {
      inputs = expand_inputs(input);
    } catch (const Error&) {
      return;  // (a missing input is the reader's to name)
    }
    const std::string format = f.get("--format", "auto");
    const bool any_table = std::any_of(inputs.files.begin(), inputs.files.end(), [&](const std::string& p) {
      try {
        const auto fmt =
            format.empty() || format == "auto" ? format_from_extension(p) : std::optional(parse_format(format));
        return !fmt || (*fmt != SequenceFormat::Fasta && *fmt != SequenceFormat::Text);
      } catch (const Error&) {
        return true;  // (a bad --format is named elsewhere)
      }
    });
    if (any_table || inputs.files.empty()) return;
    what = (inputs.files.size() == 1 ? inputs.files[0] : "every input here") +
           " is FASTA or text (records are named by their FASTA header's first word)";
  }
  for (const char* flag : {"--column", "--name-column"})
    if (f.has(flag))
      std::fprintf(stderr, "note: %s applies to CSV, TSV, JSONL and Parquet inputs; %s\n", flag, what.c_str());
}

infer::InputStream open_input(const Flags& f, const std::string& input, const Tokenizer& tok, bool keep_empty) {
  note_unused_column_flags(f, input);
  if (!is_prepared_dir(input)) {
    const auto no_split = [&] {
      if (f.has("--split")) fail("--split applies to a prepared directory (biofm prepare); ", input, " is not one");
    };
    if (std::filesystem::exists(input)) no_split();  // before reading it (a missing input is the reader's to name)
    ReaderOptions ro = reader_options(f);
    ro.keep_empty = keep_empty;
    infer::InputStream in = infer::InputStream::files(input, ro);
    no_split();  // a glob or a list
    return in;
  }
  return infer::InputStream::prepared(input, f.get("--split", "train"), tok);
}

ReaderOptions reader_options(const Flags& f) {
  ReaderOptions ro;
  ro.format = f.get("--format", "auto");
  if (!ro.format.empty() && ro.format != "auto") {
    try {
      (void)parse_format(ro.format);
    } catch (const Error& e) {
      usage_fail("--format: ", e.what());
    }
  }
  ro.column = f.get("--column", "sequence");
  ro.name_column = f.get("--name-column", "");
  return ro;
}

const ModelFamily& parse_family(const std::string& name) {
  try {
    return family_named(name);
  } catch (const Error& e) {
    usage_fail("--family: ", e.what());
  }
}

// --layers "33,-1" against L layers: each in [-(L+1), L], negatives from the end (-1 = L).
std::vector<int> resolve_layers(const std::vector<int64_t>& layers, int L, const std::string& what) {
  std::vector<int> out;
  for (const int64_t v : layers) {
    if (v < -(L + 1) || v > L)
      fail(what, ": layer ", v, " does not exist; the model has layers 0 (embeddings) to ", L,
           " (negative counts from the end: -1 = ", L, ")");
    const int k = v < 0 ? int(L + 1 + v) : int(v);
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

std::vector<int> parse_layers(const std::string& s, int L) {
  std::vector<int64_t> values;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size()) usage_fail("--layers: '", part, "' is not an integer (in '", s, "')");
    values.push_back(v);
  }
  if (values.empty()) usage_fail("--layers is empty");
  return resolve_layers(values, L, "--layers");
}

void require_one_process(const char* command) {
  const DistEnv env = detect_launched_ranks();
  if (env.distributed())
    throw UsageError(std::string(command) + " runs in one process, but this is rank " + std::to_string(env.rank) +
                     " of " + std::to_string(env.world_size) + " (" + env.source +
                     "): every rank would do the whole job into the same output; run it without the launcher "
                     "(embed and train split their work over ranks)");
}

}  // namespace biofm
