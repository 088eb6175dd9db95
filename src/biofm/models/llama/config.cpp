#include "biofm/models/llama/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/json_fields.h"

namespace biofm {

using json = nlohmann::json;

// Upper bounds well above any published Llama (405B: hidden 16384, 126 layers, 128 heads,
// 53248) that keep every size product far from int64 overflow.
constexpr int64_t kMaxHidden = 1 << 16, kMaxLayers = 1 << 12, kMaxHeads = 1 << 12, kMaxVocab = 1 << 22;
constexpr int64_t kMaxIntermediate = 1 << 20, kMaxPositions = 1 << 24;

void LlamaConfig::validate() const {
  if (vocab_size <= 0 || hidden_size <= 0 || intermediate_size <= 0 || num_hidden_layers <= 0 ||
      num_attention_heads <= 0 || num_key_value_heads <= 0)
    fail("Llama config: sizes must be positive (vocab_size ", vocab_size, ", hidden_size ", hidden_size,
         ", intermediate_size ", intermediate_size, ", num_hidden_layers ", num_hidden_layers,
         ", num_attention_heads ", num_attention_heads, ", num_key_value_heads ", num_key_value_heads, ")");
  if (vocab_size > kMaxVocab || hidden_size > kMaxHidden || intermediate_size > kMaxIntermediate ||
      num_hidden_layers > kMaxLayers || num_attention_heads > kMaxHeads || num_key_value_heads > kMaxHeads ||
      head_dim > kMaxHidden || max_position_embeddings > kMaxPositions)
    fail("Llama config: a size is above biofm's limits (vocab_size <= ", kMaxVocab, ", hidden_size, head_dim <= ",
         kMaxHidden, ", intermediate_size <= ", kMaxIntermediate, ", num_hidden_layers <= ", kMaxLayers,
         ", attention heads <= ", kMaxHeads, ", max_position_embeddings <= ", kMaxPositions, ")");
  if (max_position_embeddings <= 0)
    fail("Llama config: max_position_embeddings must be positive, got ", max_position_embeddings);
  if (head_dim < 0) fail("Llama config: head_dim must not be negative, got ", head_dim);
  if (head_dim <= 0 && hidden_size % num_attention_heads)
    fail("Llama config: hidden_size ", hidden_size, " is not divisible by num_attention_heads ",
         num_attention_heads, " (and no head_dim is given)");
  if (num_attention_heads % num_key_value_heads)
    fail("Llama config: num_attention_heads ", num_attention_heads, " is not a multiple of num_key_value_heads ",
         num_key_value_heads);
  if (head_size() % 2) fail("Llama config: head_dim ", head_size(), " must be even for rotary embeddings");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) fail("Llama config: rope_theta must be positive, got ", rope_theta);
  if (!(rms_norm_eps > 0) || !(rms_norm_eps <= 1))
    fail("Llama config: rms_norm_eps must be in (0, 1], got ", rms_norm_eps);
  if (!(initializer_range >= 0) || !(initializer_range <= 10))
    fail("Llama config: initializer_range must be in [0, 10], got ", initializer_range);
  if (rope_type != "default" && rope_type != "llama3")
    fail("Llama config: rope type '", rope_type, "' is not supported (supported: default, llama3)");
  if (rope_type == "llama3") {
    if (!(rope_factor > 0) || !std::isfinite(rope_factor)) fail("Llama config: llama3 rope factor must be positive, got ", rope_factor);
    if (!(high_freq_factor > low_freq_factor))
      fail("Llama config: llama3 high_freq_factor (", high_freq_factor, ") must exceed low_freq_factor (",
           low_freq_factor, ")");
    if (!(low_freq_factor > 0)) fail("Llama config: llama3 low_freq_factor must be positive");
    if (original_max_position_embeddings <= 0 || original_max_position_embeddings > kMaxPositions)
      fail("Llama config: original_max_position_embeddings must be positive");
  }
  for (int id : {bos_token_id, eos_token_id, pad_token_id})
    if (id < 0 || id >= vocab_size) fail("Llama config: special token id ", id, " is outside the vocabulary (", vocab_size, ")");
}

int64_t LlamaConfig::num_parameters() const {
  const int64_t H = hidden_size, F = intermediate_size, V = vocab_size, Q = q_size(), K = kv_size();
  const int64_t layer = H * Q + 2 * H * K + Q * H + 3 * H * F + 2 * H;
  return V * H + num_hidden_layers * layer + H + (tie_word_embeddings ? 0 : V * H);
}

std::vector<float> LlamaConfig::inv_freq() const {
  const int dim = head_size();
  const int half = dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  // transformers: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), all in fp32.
  const float base = float(rope_theta);
  for (int i = 0; i < half; ++i) {
    const float e = float(2 * i) / float(dim);
    f[size_t(i)] = 1.0f / std::pow(base, e);
  }
  if (rope_type != "llama3") return f;
  // _compute_llama3_parameters, element by element in fp32:
  //   wavelen = 2π / inv_freq
  //   wavelen > old/low  → inv_freq / factor            (low frequencies)
  //   wavelen < old/high → inv_freq                     (high frequencies)
  //   otherwise            (1 - s) · inv_freq / factor + s · inv_freq,
  //                        s = (old / wavelen - low) / (high - low)
  const float factor = float(rope_factor), low = float(low_freq_factor);
  const float old_len = float(original_max_position_embeddings);
  const float low_freq_wavelen = float(double(original_max_position_embeddings) / low_freq_factor);
  const float high_freq_wavelen = float(double(original_max_position_embeddings) / high_freq_factor);
  const float two_pi = float(2.0 * M_PI);
  const float span = float(high_freq_factor - low_freq_factor);
  for (int i = 0; i < half; ++i) {
    const float inv = f[size_t(i)];
    const float wavelen = two_pi / inv;
    float out = wavelen > low_freq_wavelen ? inv / factor : inv;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float s = (old_len / wavelen - low) / span;
      out = (1.0f - s) * out / factor + s * out;
    }
    f[size_t(i)] = out;
  }
  return f;
}

namespace {

// A token id: an integer, or a list whose first entry is used.
void get_token(const JsonFields& f, const char* k, int& v) {
  if (!f.has(k)) return;
  const json& x = f.obj[k];
  if (x.is_array()) {
    if (x.empty() || !x[0].is_number_integer())
      fail(f.source, ": '", k, "' must be an integer or a non-empty list of integers");
    const json first = {{k, x[0]}};
    JsonFields(first, f.source).get(k, v, 0, kMaxVocab);
    return;
  }
  f.get(k, v, 0, kMaxVocab);
}

}  // namespace

LlamaConfig llama_config_from_hf_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    fail(source, ": not valid JSON: ", e.what());
  }
  const JsonFields f(j, source);
  std::string model_type = "llama";
  f.get("model_type", model_type);
  if (model_type != "llama") fail(source, ": model_type is '", model_type, "', expected 'llama'");
  LlamaConfig c;
  // Missing keys take transformers' LlamaConfig defaults (except the token ids, which default
  // to the nucleotide tokenizer's).
  c.vocab_size = 32000;
  c.hidden_size = 4096;
  c.intermediate_size = 11008;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 0;
  c.max_position_embeddings = 2048;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = false;
  f.get("vocab_size", c.vocab_size, 1, kMaxVocab);
  f.get("hidden_size", c.hidden_size, 1, kMaxHidden);
  f.get("intermediate_size", c.intermediate_size, 1, kMaxIntermediate);
  f.get("num_hidden_layers", c.num_hidden_layers, 1, kMaxLayers);
  f.get("num_attention_heads", c.num_attention_heads, 1, kMaxHeads);
  f.get("num_key_value_heads", c.num_key_value_heads, 0, kMaxHeads);
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  f.get("head_dim", c.head_dim, 0, kMaxHidden);
  if (c.head_dim > 0 && int64_t(c.head_dim) * c.num_attention_heads == c.hidden_size)
    c.head_dim = 0;  // the derived value: keep the canonical form
  f.get("max_position_embeddings", c.max_position_embeddings, 1, kMaxPositions);
  f.get("rms_norm_eps", c.rms_norm_eps, 0.0, 1.0, /*lo_open=*/true);
  f.get("initializer_range", c.initializer_range, 0.0, 10.0);
  f.get("tie_word_embeddings", c.tie_word_embeddings);
  get_token(f, "bos_token_id", c.bos_token_id);
  get_token(f, "eos_token_id", c.eos_token_id);
  get_token(f, "pad_token_id", c.pad_token_id);

  // RoPE: rope_parameters (transformers >= 5) or top-level rope_theta + rope_scaling. Either,
  // when present and not null, must be an object (JsonFields says so naming the key).
  for (const char* k : {"rope_parameters", "rope_scaling"})
    if (f.has(k) && !j[k].is_object()) fail(source, ": '", k, "' must be a JSON object or null, got ", j[k].dump());
  json rope = json::object();
  std::string where;
  if (f.has("rope_parameters")) {
    rope = j["rope_parameters"];
    where = "rope_parameters.";
  } else if (f.has("rope_scaling")) {
    rope = j["rope_scaling"];
    where = "rope_scaling.";
  }
  const JsonFields r(rope, source, where);
  constexpr double kMaxTheta = 1e12;
  f.get("rope_theta", c.rope_theta, 0.0, kMaxTheta, true);  // legacy shape
  r.get("rope_theta", c.rope_theta, 0.0, kMaxTheta, true);  // v5 shape wins
  std::string type = "default";
  if (r.has("rope_type")) r.get("rope_type", type);
  else r.get("type", type);
  if (type != "default" && type != "llama3")
    fail(source, ": rope type '", type, "' is not supported (supported: default, llama3)");
  c.rope_type = type;
  double partial = 1.0;
  r.get("partial_rotary_factor", partial, 0.0, 1.0);
  f.get("partial_rotary_factor", partial, 0.0, 1.0);
  if (partial != 1.0) fail(source, ": partial_rotary_factor ", partial, " is not supported (only 1.0)");
  if (type == "llama3") {
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor"})
      if (!r.has(k)) fail(source, ": llama3 rope scaling needs '", where, k, "'");
    r.get("factor", c.rope_factor, 0.0, 1e6, true);
    r.get("low_freq_factor", c.low_freq_factor, 0.0, 1e6, true);
    r.get("high_freq_factor", c.high_freq_factor, 0.0, 1e6, true);
    // transformers falls back to max_position_embeddings (a top-level value wins, as there).
    c.original_max_position_embeddings = c.max_position_embeddings;
    r.get("original_max_position_embeddings", c.original_max_position_embeddings, 1, kMaxPositions);
    f.get("original_max_position_embeddings", c.original_max_position_embeddings, 1, kMaxPositions);
  }

  std::string act = "silu";
  f.get("hidden_act", act);
  if (act != "silu") fail(source, ": hidden_act '", act, "' is not supported (Llama uses silu)");
  for (const char* k : {"attention_bias", "mlp_bias"}) {
    bool bias = false;
    f.get(k, bias);
    if (bias) fail(source, ": '", k, "' = true is not supported (Llama 3 has no biases)");
  }
  // pretraining_tp > 1 only changes how HF slices the matmuls, not the math: accepted.
  try {
    c.validate();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  return c;
}

std::string llama_config_to_hf_json(const LlamaConfig& c) {
  json rope = {{"rope_type", c.rope_type}, {"rope_theta", c.rope_theta}};
  if (c.rope_type == "llama3") {
    rope["factor"] = c.rope_factor;
    rope["low_freq_factor"] = c.low_freq_factor;
    rope["high_freq_factor"] = c.high_freq_factor;
    rope["original_max_position_embeddings"] = c.original_max_position_embeddings;
  }
  json legacy_scaling = nullptr;
  if (c.rope_type != "default") {
    legacy_scaling = rope;
    legacy_scaling.erase("rope_theta");
  }
  json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", c.bos_token_id},
      {"eos_token_id", c.eos_token_id},
      {"pad_token_id", c.pad_token_id},
      {"head_dim", c.head_size()},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"initializer_range", c.initializer_range},
      {"intermediate_size", c.intermediate_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"mlp_bias", false},
      {"num_attention_heads", c.num_attention_heads},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_key_value_heads", c.num_key_value_heads},
      {"pretraining_tp", 1},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_parameters", rope},
      // (the transformers 4.x spelling of the same RoPE, which 4.x reads instead: without it a
      // 4.x LlamaConfig takes rope_theta 10000 and no scaling)
      {"rope_theta", c.rope_theta},
      {"rope_scaling", legacy_scaling},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"dtype", "float32"},
      {"torch_dtype", "float32"},  // (4.x's name of dtype)
      {"use_cache", true},
      {"vocab_size", c.vocab_size},
  };
  return j.dump(2) + "\n";
}

}  // namespace biofm
