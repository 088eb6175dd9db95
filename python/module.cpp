// biofm._core: the C++ engine for Python (pybind11). Kept to what a notebook needs: embeddings of
// sequences in memory as NumPy arrays, through the same model loading, batching, windows and
// pooling as `biofm embed` (infer/embedder). The Python side (biofm/__init__.py) adds
// load_metrics and the friendly signatures.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "biofm/cli/model_flags.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/error.h"
#include "biofm/core/notes.h"
#include "biofm/data/dataset.h"
#include "biofm/data/reader.h"
#include "biofm/infer/embedder.h"
#include "biofm/infer/pooling.h"
#include "biofm/models/model_config.h"
#include "biofm/models/registry.h"

namespace py = pybind11;
using namespace biofm;

namespace {

// The engine's parsers speak in CLI flags (--device, --precision); these checks come first, in
// the Python argument names, and before the model loads (a mistake costs no loading time).
Device python_device(const std::string& s) {
  int n = -1;  // cuda:N
  if (s.rfind("cuda:", 0) == 0) {
    const auto [ptr, ec] = std::from_chars(s.data() + 5, s.data() + s.size(), n);
    if (ec != std::errc() || ptr != s.data() + s.size()) n = -1;
  }
  if (s != "auto" && s != "cpu" && s != "cuda" && n < 0)
    fail("device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got '", s, "'");
  if ((s == "cuda" || n >= 0) && !cuda_available())
    fail("device='", s, "': no GPU available (or biofm was built without CUDA: pip install . -C cmake.define.BIOFM_CUDA=ON)");
  if (n >= cuda_device_count()) fail("device='", s, "': this process sees ", cuda_device_count(), " GPU(s)");
  return parse_device(s);
}

InferencePrecision python_precision(const std::string& s, Device dev) {
  if (!s.empty() && s != "fp32" && s != "bf16" && s != "fp8")
    fail("precision must be None, 'bf16', 'fp8' or 'fp32', got '", s, "'");
  if ((s == "bf16" || s == "fp8") && dev != Device::CUDA)
    fail("precision='", s, "' needs a GPU (the CPU backend computes in fp32: precision=None or 'fp32')");
  if (s == "fp8" && cuda_compute_capability() < 89)
    fail("precision='fp8' needs a GPU with FP8 tensor cores (compute capability 8.9 or newer)");
  return parse_inference_precision(s, dev);
}

// layers as given (0 = the embedding output, L = the final states, negative from the end),
// resolved against a model of L layers; duplicates dropped, order kept.
std::vector<int> python_layers(const std::vector<int64_t>& layers, int L) {
  if (layers.empty()) fail("layers is empty");
  return resolve_layers(layers, L, "layers");
}

// Returns (per requested layer: (its resolved index 0..L, a float32 array [len(sequences),
// hidden])), the counts `biofm embed` reports (truncated records, unknown residues, ...) and the
// engine's notes (core/notes.h: what the CLI prints as "note: ...", here for the package to
// warn with instead of stderr; a call that raises drops them: its error says what went wrong).
// Rows in input order (empty sequences are an error here, not a silent skip, so rows match the
// list).
py::tuple embed(const std::string& model_dir, const std::vector<std::string>& sequences,
                const std::vector<int64_t>& layers, const std::string& pooling, const std::string& device,
                const std::string& precision, int64_t max_tokens, int64_t max_seq_length, int64_t window,
                int64_t stride) {
  NoteCapture notes;  // (this thread's: loading and the embedder's batches run on it)
  std::string cleaned;
  for (size_t i = 0; i < sequences.size(); ++i) {
    cleaned = sequences[i];
    clean_sequence(cleaned, /*strip_stop=*/true);  // as SequenceDataset::from_sequences does
    if (cleaned.empty())
      fail("embed: sequences[", i, "] is empty", sequences[i].empty() ? "" : " (only whitespace and stop codons)");
  }
  infer::EmbedOptions o;
  if (pooling == "none") fail("embed: pooling 'none' (per-token states) is not offered here; use `biofm embed`");
  if (pooling != "mean" && pooling != "cls" && pooling != "last")
    fail("pooling must be 'mean', 'cls' or 'last', got '", pooling, "'");
  o.pooling = infer::parse_pooling(pooling);
  if (window < 0 || max_seq_length < 0 || max_tokens < 0) fail("embed: window, max_seq_length and max_tokens must be positive");
  if (stride < -1) fail("embed: stride must be >= 0, got ", stride);  // (-1: the default)
  if (window > 0 && max_seq_length > 0) fail("embed: window and max_seq_length exclude each other");
  const Device dev = python_device(device);
  const InferencePrecision prec = python_precision(precision, dev);
  const ModelFamily& family = family_of_dir(model_dir);
  if (!family.embed) fail("embed does not support model_type '", family.hf_model_type, "'");
  ModelShape shape;
  family.read_shape(model_dir, shape);  // (config.json only: the checks below need the model's size)
  o.layers = python_layers(layers, shape.num_hidden_layers);
  const int64_t max_pos = shape.max_position_embeddings;
  // As `biofm embed`: windows when asked for, and by default for DNA models (at the model's
  // context) unless max_seq_length asks for truncation; else truncation at max_seq_length.
  const bool causal = family.objective == Objective::CausalLM;
  o.windows = window > 0 || (causal && max_seq_length <= 0);
  if (o.windows) {
    o.window_tokens = window > 0 ? window : max_pos;
    if (o.window_tokens < 3) fail("embed: window must be at least 3 tokens, got ", o.window_tokens);
    o.stride = stride >= 0 ? stride : std::min<int64_t>(200, (o.window_tokens - 2) / 2);
    if (o.stride > o.window_tokens - 3)
      fail("embed: stride ", o.stride, " must be below the window's bases (", o.window_tokens - 2, ")");
  } else {
    if (stride >= 0) fail("embed: stride applies with windows (window=N) only");
    o.window_tokens = max_seq_length > 0 ? max_seq_length : std::min<int64_t>(1024, max_pos);
    if (o.window_tokens < 3) fail("embed: max_seq_length must be at least 3, got ", o.window_tokens);
  }
  o.act_dtype = prec.params == Precision::F32 ? DType::F32 : DType::BF16;
  o.max_tokens = std::max<int64_t>(max_tokens > 0 ? max_tokens : (dev == Device::CUDA ? 16384 : 8192), o.window_tokens);
  // Ctrl-C: Python's handler only sets a flag while the engine runs without the GIL; after each
  // batch, take the GIL and run the handlers, and stop (the KeyboardInterrupt goes to the
  // caller) when one raised.
  o.after_batch = [] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  };
  const SequenceDataset data = SequenceDataset::from_sequences(sequences);
  BIOFM_CHECK(data.size() == sequences.size());  // (none is empty after cleaning: checked above)

  std::unique_ptr<LanguageModel> model = load_model(family, model_dir, dev, prec);
  BIOFM_CHECK(model->dims().layers == shape.num_hidden_layers && model->dims().max_positions == max_pos);
  infer::EmbedResult r;
  {
    py::gil_scoped_release release;  // the model runs without holding Python up
    infer::Embedder embedder(*model, family.tokenizer(), o, causal);
    r = embedder.run(data, 0, data.size());
  }
  py::list arrays;
  for (size_t l = 0; l < r.pooled.size(); ++l) {
    const Tensor& t = r.pooled[l];
    py::array_t<float> a({t.size(0), t.size(1)});
    std::memcpy(a.mutable_data(), t.f32(), size_t(t.numel()) * sizeof(float));
    arrays.append(py::make_tuple(o.layers[l], std::move(a)));
  }
  py::dict stats;
  stats["sequences"] = data.size();
  stats["truncated"] = r.truncated;
  stats["unknown"] = r.unknown;
  stats["windows"] = r.windows;
  stats["tokens"] = r.tokens;
  stats["max_seq_length"] = o.windows ? 0 : o.window_tokens;  // (the truncation length; 0 with windows)
  stats["window"] = o.windows ? o.window_tokens : 0;
  return py::make_tuple(arrays, stats, notes.take());
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "biofm's C++ engine (see the biofm package for the documented API)";
  m.attr("__version__") = BIOFM_VERSION;
  // A biofm::Error (bad input, missing files) becomes a ValueError with biofm's message.
  py::register_exception<Error>(m, "BiofmError", PyExc_ValueError);
  m.def("embed", &embed, py::arg("model_dir"), py::arg("sequences"), py::arg("layers") = std::vector<int64_t>{-1},
        py::arg("pooling") = "mean", py::arg("device") = "auto", py::arg("precision") = "",
        py::arg("max_tokens") = 0, py::arg("max_seq_length") = 0, py::arg("window") = 0, py::arg("stride") = -1);
  // GPU state back to the driver (the package registers it with atexit, as the CLI's main does).
  m.def("_release_device", [] { device_release_at_exit(); });
}
