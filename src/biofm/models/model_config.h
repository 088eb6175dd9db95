// The architecture keys of a training config (model.config.*), named as in Hugging Face
// config.json. One struct serves every family; each family reads the keys it uses and checks
// them (ModelFamily::check_config in models/registry.h).
#pragma once
#include <string>

namespace biofm {

struct ModelShape {
  int hidden_size = 320;
  int num_hidden_layers = 6;
  int num_attention_heads = 20;
  int num_key_value_heads = 0;  // 0 = num_attention_heads (no GQA)
  int intermediate_size = 1280;
  int vocab_size = 33;
  int max_position_embeddings = 1026;
  double layer_norm_eps = 1e-5;  // ESM-2
  double rms_norm_eps = 1e-5;    // Llama
  double initializer_range = 0.02;
  bool token_dropout = true;     // ESM-2
  double rope_theta = 10000.0;
  bool tie_word_embeddings = true;
  std::string hidden_act = "gelu";  // gelu (exact erf; ESM-2) | silu (Llama SwiGLU)
  // Llama 3 rope scaling (used when rope_scaling_type == Llama3).
  std::string rope_scaling_type;  // "" (none) | llama3
  double rope_scaling_factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  double embedding_init_std = 0.0;  // 0 = initializer_range; OG2 Spike-No-More uses 1.0
  bool scaled_init = false;  // Megatron: o_proj/down_proj std = initializer_range/sqrt(2L)

  int kv_heads() const { return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads; }
  int head_dim() const { return hidden_size / num_attention_heads; }
  double embedding_std() const { return embedding_init_std > 0 ? embedding_init_std : initializer_range; }
  bool operator==(const ModelShape&) const = default;
};

}  // namespace biofm
