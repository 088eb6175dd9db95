// Llama 3 hyper-parameters, read from and written to a Hugging Face config.json.
//
// Both config shapes are read: transformers >= 5 writes `rope_parameters: {rope_type,
// rope_theta, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings}`
// and `head_dim`; older checkpoints (e.g. Llama-3.2-1B) have top-level `rope_theta` and
// `rope_scaling` (with `rope_type` or the older `type` key) and no `head_dim`. Written files
// use the transformers-5 shape (what LlamaForCausalLM in transformers 5.17 loads).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace biofm {

struct LlamaConfig {
  int vocab_size = 256;
  int hidden_size = 2048;
  int intermediate_size = 8192;
  int num_hidden_layers = 16;
  int num_attention_heads = 32;
  int num_key_value_heads = 8;
  int head_dim = 0;  // 0 = hidden_size / num_attention_heads
  int max_position_embeddings = 8192;
  double rms_norm_eps = 1e-5;
  double rope_theta = 500000.0;
  // RoPE scaling: "default" (none) or "llama3" (the Llama 3.1 frequency remap).
  std::string rope_type = "default";
  double rope_factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  // OpenGenome2 init options (not Hugging Face config keys; used for random init only).
  double embedding_init_std = 0.0;  // > 0: embedding std (Spike-No-More: 1.0); else initializer_range
  bool scaled_init = false;         // o_proj / down_proj std = initializer_range / sqrt(2 L)
  // Nucleotide tokenizer ids.
  int bos_token_id = 2;
  int eos_token_id = 0;
  int pad_token_id = 1;

  int head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  int q_size() const { return num_attention_heads * head_size(); }
  int kv_size() const { return num_key_value_heads * head_size(); }
  void validate() const;  // throws naming the offending field
  int64_t num_parameters() const;
  // RoPE inverse frequencies [head_size/2], fp32, exactly as transformers computes them
  // (_compute_default_rope_parameters / _compute_llama3_parameters).
  std::vector<float> inv_freq() const;
};

// Parses a Hugging Face Llama config.json text; `source` names it in errors.
LlamaConfig llama_config_from_hf_json(const std::string& text, const std::string& source);
std::string llama_config_to_hf_json(const LlamaConfig& c);

}  // namespace biofm
