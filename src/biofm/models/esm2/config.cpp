#include "biofm/models/esm2/config.h"

#include <nlohmann/json.hpp>

#include "biofm/core/error.h"

namespace biofm {

using json = nlohmann::json;

void Esm2Config::validate() const {
  if (hidden_size <= 0 || num_hidden_layers <= 0 || num_attention_heads <= 0 || intermediate_size <= 0)
    fail("ESM-2 config: sizes must be positive (hidden_size ", hidden_size, ", num_hidden_layers ",
         num_hidden_layers, ", num_attention_heads ", num_attention_heads, ", intermediate_size ",
         intermediate_size, ")");
  if (hidden_size % num_attention_heads)
    fail("ESM-2 config: hidden_size ", hidden_size, " is not divisible by num_attention_heads ",
         num_attention_heads);
  if (head_dim() % 2) fail("ESM-2 config: head_dim ", head_dim(), " must be even for rotary");
  if (vocab_size != 33) fail("ESM-2 config: vocab_size must be 33 (the ESM tokenizer), got ", vocab_size);
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
  Esm2Config c;
  auto get_int = [&](const char* k, int& v) {
    if (j.contains(k) && !j[k].is_null()) {
      if (!j[k].is_number_integer()) fail(source, ": '", k, "' must be an integer");
      v = j[k].get<int>();
    }
  };
  auto get_float = [&](const char* k, float& v) {
    if (j.contains(k) && !j[k].is_null()) {
      if (!j[k].is_number()) fail(source, ": '", k, "' must be a number");
      v = j[k].get<float>();
    }
  };
  std::string model_type = j.value("model_type", "esm");
  if (model_type != "esm") fail(source, ": model_type is '", model_type, "', expected 'esm'");
  get_int("vocab_size", c.vocab_size);
  get_int("hidden_size", c.hidden_size);
  get_int("num_hidden_layers", c.num_hidden_layers);
  get_int("num_attention_heads", c.num_attention_heads);
  get_int("intermediate_size", c.intermediate_size);
  get_int("max_position_embeddings", c.max_position_embeddings);
  get_int("mask_token_id", c.mask_token_id);
  get_int("pad_token_id", c.pad_token_id);
  get_float("layer_norm_eps", c.layer_norm_eps);
  get_float("initializer_range", c.initializer_range);
  if (j.contains("token_dropout")) c.token_dropout = j["token_dropout"].get<bool>();
  std::string pos = j.value("position_embedding_type", "rotary");
  if (pos != "rotary") fail(source, ": position_embedding_type '", pos, "' is not supported (only rotary)");
  if (j.contains("emb_layer_norm_before") && j["emb_layer_norm_before"].is_boolean() &&
      j["emb_layer_norm_before"].get<bool>())
    fail(source, ": emb_layer_norm_before=true is not supported (ESM-2 uses false)");
  std::string act = j.value("hidden_act", "gelu");
  if (act != "gelu") fail(source, ": hidden_act '", act, "' is not supported (ESM-2 uses gelu)");
  for (const char* k : {"hidden_dropout_prob", "attention_probs_dropout_prob"})
    if (j.contains(k) && j[k].is_number() && j[k].get<double>() != 0.0)
      fail(source, ": '", k, "' must be 0 (ESM-2 trains without dropout)");
  c.validate();
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
      {"initializer_range", c.initializer_range},
      {"intermediate_size", c.intermediate_size},
      {"is_folding_model", false},
      {"layer_norm_eps", c.layer_norm_eps},
      {"mask_token_id", c.mask_token_id},
      {"max_position_embeddings", c.max_position_embeddings},
      {"num_attention_heads", c.num_attention_heads},
      {"num_hidden_layers", c.num_hidden_layers},
      {"pad_token_id", c.pad_token_id},
      {"position_embedding_type", "rotary"},
      {"tie_word_embeddings", true},
      {"token_dropout", c.token_dropout},
      {"torch_dtype", "float32"},
      {"use_cache", true},
      {"vocab_list", nullptr},
      {"vocab_size", c.vocab_size},
  };
  return j.dump(2) + "\n";
}

}  // namespace biofm
