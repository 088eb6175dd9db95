#include "biofm/models/esm2/config.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "biofm/core/error.h"
#include "biofm/io/json_fields.h"

namespace biofm {

using json = nlohmann::json;

// Upper bounds well above any published ESM-2 (15B: hidden 5120, 48 layers, 40 heads, 20480)
// that keep every size product far from int64 overflow.
constexpr int64_t kMaxHidden = 1 << 16, kMaxLayers = 1 << 12, kMaxHeads = 1 << 12;
constexpr int64_t kMaxIntermediate = 1 << 20, kMaxPositions = 1 << 22;

void Esm2Config::validate() const {
  if (hidden_size <= 0 || num_hidden_layers <= 0 || num_attention_heads <= 0 || intermediate_size <= 0 ||
      max_position_embeddings <= 0)
    fail("ESM-2 config: sizes must be positive (hidden_size ", hidden_size, ", num_hidden_layers ",
         num_hidden_layers, ", num_attention_heads ", num_attention_heads, ", intermediate_size ",
         intermediate_size, ", max_position_embeddings ", max_position_embeddings, ")");
  if (hidden_size > kMaxHidden || num_hidden_layers > kMaxLayers || num_attention_heads > kMaxHeads ||
      intermediate_size > kMaxIntermediate || max_position_embeddings > kMaxPositions)
    fail("ESM-2 config: a size is above biofm's limits (hidden_size <= ", kMaxHidden, ", num_hidden_layers <= ",
         kMaxLayers, ", num_attention_heads <= ", kMaxHeads, ", intermediate_size <= ", kMaxIntermediate,
         ", max_position_embeddings <= ", kMaxPositions, ")");
  if (hidden_size % num_attention_heads)
    fail("ESM-2 config: hidden_size ", hidden_size, " is not divisible by num_attention_heads ",
         num_attention_heads);
  if (head_dim() % 2) fail("ESM-2 config: head_dim ", head_dim(), " must be even for rotary");
  if (vocab_size != 33) fail("ESM-2 config: vocab_size must be 33 (the ESM tokenizer), got ", vocab_size);
  if (!(layer_norm_eps > 0) || !std::isfinite(layer_norm_eps) || layer_norm_eps > 1)
    fail("ESM-2 config: layer_norm_eps must be in (0, 1], got ", layer_norm_eps);
  if (!(initializer_range >= 0) || !std::isfinite(initializer_range) || initializer_range > 10)
    fail("ESM-2 config: initializer_range must be in [0, 10], got ", initializer_range);
  for (int id : {mask_token_id, pad_token_id})
    if (id < 0 || id >= vocab_size) fail("ESM-2 config: special token id ", id, " is outside the vocabulary");
}

int64_t Esm2Config::num_parameters() const {
  int64_t H = hidden_size, F = intermediate_size, V = vocab_size;
  int64_t layer = 4 * (H * H + H) + 2 * H * F + F + H + 4 * H;
  return V * H + num_hidden_layers * layer + 2 * H + (H * H + H) + 2 * H + V;
}

Esm2Config esm2_config_from_hf_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    fail(source, ": not valid JSON: ", e.what());
  }
  const JsonFields f(j, source);
  Esm2Config c;
  std::string model_type = "esm";
  f.get("model_type", model_type);
  if (model_type != "esm") fail(source, ": model_type is '", model_type, "', expected 'esm'");
  f.get("vocab_size", c.vocab_size, 1, 1 << 20);
  f.get("hidden_size", c.hidden_size, 1, kMaxHidden);
  f.get("num_hidden_layers", c.num_hidden_layers, 1, kMaxLayers);
  f.get("num_attention_heads", c.num_attention_heads, 1, kMaxHeads);
  f.get("intermediate_size", c.intermediate_size, 1, kMaxIntermediate);
  f.get("max_position_embeddings", c.max_position_embeddings, 1, kMaxPositions);
  f.get("mask_token_id", c.mask_token_id, 0, 1 << 20);
  f.get("pad_token_id", c.pad_token_id, 0, 1 << 20);
  f.get("layer_norm_eps", c.layer_norm_eps, 0.0, 1.0, /*lo_open=*/true);
  f.get("initializer_range", c.initializer_range, 0.0, 10.0);
  f.get("token_dropout", c.token_dropout);
  // transformers' EsmForMaskedLM then decodes with a weight of its own (lm_head.decoder.weight);
  // biofm's ESM-2 decodes with the word embeddings only, which would be another model.
  bool tied = true;
  f.get("tie_word_embeddings", tied);
  if (!tied)
    fail(source, ": tie_word_embeddings=false (an untied decoder, lm_head.decoder.weight) is not supported: biofm's "
         "ESM-2 decodes with the word embeddings");
  std::string pos = "rotary";
  f.get("position_embedding_type", pos);
  if (pos != "rotary") fail(source, ": position_embedding_type '", pos, "' is not supported (only rotary)");
  bool emb_ln_before = false;
  f.get("emb_layer_norm_before", emb_ln_before);
  if (emb_ln_before) fail(source, ": emb_layer_norm_before=true is not supported (ESM-2 uses false)");
  std::string act = "gelu";
  f.get("hidden_act", act);
  if (act != "gelu") fail(source, ": hidden_act '", act, "' is not supported (ESM-2 uses gelu)");
  for (const char* k : {"hidden_dropout_prob", "attention_probs_dropout_prob"}) {
    double p = 0.0;
    f.get(k, p, 0.0, 1.0);
    if (p != 0.0) fail(source, ": '", k, "' must be 0 (ESM-2 trains without dropout)");
  }
  try {
    c.validate();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  return c;
}

std::string esm2_config_to_hf_json(const Esm2Config& c) {
  json j = {
      {"architectures", {"EsmForMaskedLM"}},
      {"model_type", "esm"},
      {"attention_probs_dropout_prob", 0.0},
      {"classifier_dropout", nullptr},
      {"emb_layer_norm_before", false},
      {"esmfold_config", nullptr},
      {"hidden_act", "gelu"},
      {"hidden_dropout_prob", 0.0},
      {"hidden_size", c.hidden_size},
      {"initializer_range", json_float32(c.initializer_range)},
      {"intermediate_size", c.intermediate_size},
      {"is_folding_model", false},
      {"layer_norm_eps", json_float32(c.layer_norm_eps)},
      {"mask_token_id", c.mask_token_id},
      {"max_position_embeddings", c.max_position_embeddings},
      {"num_attention_heads", c.num_attention_heads},
      {"num_hidden_layers", c.num_hidden_layers},
      {"pad_token_id", c.pad_token_id},
      {"position_embedding_type", "rotary"},
      {"tie_word_embeddings", true},
      {"token_dropout", c.token_dropout},
      {"torch_dtype", "float32"},
      {"dtype", "float32"},  // (transformers 5's name of torch_dtype)
      {"use_cache", true},
      {"vocab_list", nullptr},
      {"vocab_size", c.vocab_size},
  };
  return j.dump(2) + "\n";
}

}  // namespace biofm
