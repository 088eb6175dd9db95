// ESM-2 hyper-parameters, read from and written to a Hugging Face config.json.
#pragma once
#include <string>

namespace biofm {

struct Esm2Config {
  int vocab_size = 33;
  int hidden_size = 320;
  int num_hidden_layers = 6;
  int num_attention_heads = 20;
  int intermediate_size = 1280;
  int max_position_embeddings = 1026;
  float layer_norm_eps = 1e-5f;
  float initializer_range = 0.02f;
  bool token_dropout = true;
  int mask_token_id = 32;
  int pad_token_id = 1;

  int head_dim() const { return hidden_size / num_attention_heads; }
  void validate() const;  // throws with the offending field
  int64_t num_parameters() const;
};

// Parses a Hugging Face ESM config.json text; `source` names it in errors.
Esm2Config esm2_config_from_hf_json(const std::string& text, const std::string& source);
std::string esm2_config_to_hf_json(const Esm2Config& c);

}  // namespace biofm
