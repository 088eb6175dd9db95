#include "biofm/models/llama/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"

namespace biofm {

using json = nlohmann::json;

void LlamaConfig::validate() const {
  if (vocab_size <= 0 || hidden_size <= 0 || intermediate_size <= 0 || num_hidden_layers <= 0 ||
      num_attention_heads <= 0 || num_key_value_heads <= 0)
    fail("Llama config: sizes must be positive (vocab_size ", vocab_size, ", hidden_size ", hidden_size,
         ", intermediate_size ", intermediate_size, ", num_hidden_layers ", num_hidden_layers,
         ", num_attention_heads ", num_attention_heads, ", num_key_value_heads ", num_key_value_heads, ")");
  if (head_dim <= 0 && hidden_size % num_attention_heads)
    fail("Llama config: hidden_size ", hidden_size, " is not divisible by num_attention_heads ",
         num_attention_heads, " (and no head_dim is given)");
  if (num_attention_heads % num_key_value_heads)
    fail("Llama config: num_attention_heads ", num_attention_heads, " is not a multiple of num_key_value_heads ",
         num_key_value_heads);
  if (head_size() % 2) fail("Llama config: head_dim ", head_size(), " must be even for rotary embeddings");
  if (!(rope_theta > 0)) fail("Llama config: rope_theta must be positive, got ", rope_theta);
  if (!(rms_norm_eps > 0)) fail("Llama config: rms_norm_eps must be positive, got ", rms_norm_eps);
  if (rope_type != "default" && rope_type != "llama3")
    fail("Llama config: rope type '", rope_type, "' is not supported (supported: default, llama3)");
  if (rope_type == "llama3") {
    if (!(rope_factor > 0)) fail("Llama config: llama3 rope factor must be positive, got ", rope_factor);
    if (!(high_freq_factor > low_freq_factor))
      fail("Llama config: llama3 high_freq_factor (", high_freq_factor, ") must exceed low_freq_factor (",
           low_freq_factor, ")");
    if (!(low_freq_factor > 0)) fail("Llama config: llama3 low_freq_factor must be positive");
    if (original_max_position_embeddings <= 0)
      fail("Llama config: original_max_position_embeddings must be positive");
  }
  for (int id : {bos_token_id, eos_token_id, pad_token_id})
    if (id >= vocab_size) fail("Llama config: special token id ", id, " is outside the vocabulary (", vocab_size, ")");
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

struct Reader {
  const json& j;
  const std::string& source;
  void get_int(const json& obj, const char* k, int& v, const char* where = "") const {
    if (!obj.contains(k) || obj[k].is_null()) return;
    if (!obj[k].is_number_integer()) fail(source, ": '", where, k, "' must be an integer");
    v = obj[k].get<int>();
  }
  template <class F>
  void get_num(const json& obj, const char* k, F& v, const char* where = "") const {
    if (!obj.contains(k) || obj[k].is_null()) return;
    if (!obj[k].is_number()) fail(source, ": '", where, k, "' must be a number");
    v = obj[k].get<F>();
  }
  // A token id: an integer, or a list whose first entry is used.
  void get_token(const char* k, int& v) const {
    if (!j.contains(k) || j[k].is_null()) return;
    const json& x = j[k];
    if (x.is_number_integer()) {
      v = x.get<int>();
    } else if (x.is_array() && !x.empty() && x[0].is_number_integer()) {
      v = x[0].get<int>();
    } else {
      fail(source, ": '", k, "' must be an integer or a list of integers");
    }
  }
};

}  // namespace

LlamaConfig llama_config_from_hf_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    fail(source, ": not valid JSON: ", e.what());
  }
  if (!j.is_object()) fail(source, ": expected a JSON object");
  std::string model_type = j.value("model_type", "llama");
  if (model_type != "llama") fail(source, ": model_type is '", model_type, "', expected 'llama'");
  Reader r{j, source};
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
  r.get_int(j, "vocab_size", c.vocab_size);
  r.get_int(j, "hidden_size", c.hidden_size);
  r.get_int(j, "intermediate_size", c.intermediate_size);
  r.get_int(j, "num_hidden_layers", c.num_hidden_layers);
  r.get_int(j, "num_attention_heads", c.num_attention_heads);
  r.get_int(j, "num_key_value_heads", c.num_key_value_heads);
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  r.get_int(j, "head_dim", c.head_dim);
  if (c.head_dim > 0 && c.num_attention_heads > 0 && c.head_dim * c.num_attention_heads == c.hidden_size)
    c.head_dim = 0;  // the derived value: keep the canonical form
  r.get_int(j, "max_position_embeddings", c.max_position_embeddings);
  r.get_num(j, "rms_norm_eps", c.rms_norm_eps);
  r.get_num(j, "initializer_range", c.initializer_range);
  if (j.contains("tie_word_embeddings") && !j["tie_word_embeddings"].is_null()) {
    if (!j["tie_word_embeddings"].is_boolean()) fail(source, ": 'tie_word_embeddings' must be true or false");
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  r.get_token("bos_token_id", c.bos_token_id);
  r.get_token("eos_token_id", c.eos_token_id);
  r.get_token("pad_token_id", c.pad_token_id);

  // RoPE: rope_parameters (transformers >= 5) or top-level rope_theta + rope_scaling.
  json rope = json::object();
  std::string where;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    rope = j["rope_parameters"];
    where = "rope_parameters.";
  } else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    rope = j["rope_scaling"];
    where = "rope_scaling.";
  } else if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    fail(source, ": 'rope_scaling' must be an object or null");
  }
  r.get_num(j, "rope_theta", c.rope_theta);               // legacy shape
  r.get_num(rope, "rope_theta", c.rope_theta, where.c_str());  // v5 shape wins
  std::string type = "default";
  if (rope.contains("rope_type") && rope["rope_type"].is_string()) type = rope["rope_type"].get<std::string>();
  else if (rope.contains("type") && rope["type"].is_string()) type = rope["type"].get<std::string>();
  if (type != "default" && type != "llama3")
    fail(source, ": rope type '", type, "' is not supported (supported: default, llama3)");
  c.rope_type = type;
  double partial = 1.0;
  r.get_num(rope, "partial_rotary_factor", partial, where.c_str());
  r.get_num(j, "partial_rotary_factor", partial);
  if (partial != 1.0) fail(source, ": partial_rotary_factor ", partial, " is not supported (only 1.0)");
  if (type == "llama3") {
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor"})
      if (!rope.contains(k) || !rope[k].is_number()) fail(source, ": llama3 rope scaling needs '", where, k, "'");
    r.get_num(rope, "factor", c.rope_factor, where.c_str());
    r.get_num(rope, "low_freq_factor", c.low_freq_factor, where.c_str());
    r.get_num(rope, "high_freq_factor", c.high_freq_factor, where.c_str());
    // transformers falls back to max_position_embeddings (a top-level value wins, as there).
    c.original_max_position_embeddings = c.max_position_embeddings;
    r.get_int(rope, "original_max_position_embeddings", c.original_max_position_embeddings, where.c_str());
    r.get_int(j, "original_max_position_embeddings", c.original_max_position_embeddings);
  }

  std::string act = j.value("hidden_act", "silu");
  if (act != "silu") fail(source, ": hidden_act '", act, "' is not supported (Llama uses silu)");
  for (const char* k : {"attention_bias", "mlp_bias"})
    if (j.contains(k) && j[k].is_boolean() && j[k].get<bool>())
      fail(source, ": '", k, "' = true is not supported (Llama 3 has no biases)");
  if (j.contains("pretraining_tp") && j["pretraining_tp"].is_number_integer() && j["pretraining_tp"].get<int>() > 1) {
    // pretraining_tp > 1 only changes how HF slices the matmuls, not the math: accepted.
  }
  c.validate();
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
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"dtype", "float32"},
      {"use_cache", true},
      {"vocab_size", c.vocab_size},
  };
  return j.dump(2) + "\n";
}

}  // namespace biofm
