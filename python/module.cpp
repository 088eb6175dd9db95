// biofm._core: the C++ engine for Python (pybind11). Kept to what a notebook needs: embeddings of
// sequences in memory as NumPy arrays, through the same model loading, batching, windows and
// pooling as `biofm embed` (infer/embedder). The Python side (biofm/__init__.py) adds
// load_metrics and the friendly signatures.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "biofm/cli/model_flags.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/error.h"
#include "biofm/data/dataset.h"
#include "biofm/infer/embedder.h"
#include "biofm/infer/pooling.h"
#include "biofm/models/registry.h"

namespace py = pybind11;
using namespace biofm;

namespace {

// Per requested layer: (its resolved index 0..L, a float32 array [len(sequences), hidden]); rows
// in input order (empty sequences are an error here, not a silent skip, so rows match the list).
std::vector<std::pair<int, py::array_t<float>>> embed(const std::string& model_dir, const std::vector<std::string>& sequences,
                                      const std::string& layers, const std::string& pooling, const std::string& device,
                                      const std::string& precision, int64_t max_tokens, int64_t max_seq_length,
                                      int64_t window, int64_t stride) {
  for (size_t i = 0; i < sequences.size(); ++i)
    if (sequences[i].empty()) fail("embed: sequence ", i, " is empty");
  const Device dev = parse_device(device);
  const InferencePrecision prec = parse_inference_precision(precision, dev);
  const ModelFamily& family = family_of_dir(model_dir);
  if (!family.embed) fail("embed does not support model_type '", family.hf_model_type, "'");
  std::unique_ptr<LanguageModel> model = load_model(family, model_dir, dev, prec);
  infer::EmbedOptions o;
  o.pooling = infer::parse_pooling(pooling);
  if (o.pooling == infer::Pooling::None) fail("embed: pooling 'none' (per-token states) is not offered here; use the CLI");
  o.layers = parse_layers(layers, int(model->dims().layers));
  const int64_t max_pos = model->dims().max_positions;
  // As `biofm embed`: windows when asked for, and by default for DNA models (at the model's
  // context) unless max_seq_length asks for truncation; else truncation at max_seq_length.
  const bool causal = family.objective == Objective::CausalLM;
  if (window < 0 || max_seq_length < 0 || max_tokens < 0) fail("embed: window, max_seq_length and max_tokens must be positive");
  if (stride < -1) fail("embed: stride must be >= 0, got ", stride);  // (-1: the default)
  if (window > 0 && max_seq_length > 0) fail("embed: window and max_seq_length exclude each other");
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
  const SequenceDataset data = SequenceDataset::from_sequences(sequences);
  if (data.size() != sequences.size()) fail("embed: ", sequences.size() - data.size(), " sequences were empty after cleaning");
  infer::EmbedResult r;
  {
    py::gil_scoped_release release;  // the model runs without holding Python up
    infer::Embedder embedder(*model, family.tokenizer(), o, causal);
    r = embedder.run(data, 0, data.size());
  }
  std::vector<std::pair<int, py::array_t<float>>> out;
  for (size_t l = 0; l < r.pooled.size(); ++l) {
    const Tensor& t = r.pooled[l];
    py::array_t<float> a({t.size(0), t.size(1)});
    std::memcpy(a.mutable_data(), t.f32(), size_t(t.numel()) * sizeof(float));
    out.emplace_back(o.layers[l], std::move(a));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "biofm's C++ engine (see the biofm package for the documented API)";
  m.attr("__version__") = BIOFM_VERSION;
  // A biofm::Error (bad input, missing files) becomes a ValueError with biofm's message.
  py::register_exception<Error>(m, "BiofmError", PyExc_ValueError);
  m.def("embed", &embed, py::arg("model_dir"), py::arg("sequences"), py::arg("layers") = "-1",
        py::arg("pooling") = "mean", py::arg("device") = "auto", py::arg("precision") = "",
        py::arg("max_tokens") = 0, py::arg("max_seq_length") = 0, py::arg("window") = 0, py::arg("stride") = -1);
  // GPU state back to the driver (the package registers it with atexit, as the CLI's main does).
  m.def("_release_device", [] { device_release_at_exit(); });
}
