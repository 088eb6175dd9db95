#include "biofm/models/llama/model.h"

#include <cmath>

#include "biofm/io/atomic_file.h"
#include "biofm/models/hf_dir.h"
#include "biofm/models/llama/tokenizer_files.h"

namespace biofm {

namespace {

std::string layer_name(int l, const std::string& rest) {
  return "model.layers." + std::to_string(l) + "." + rest;
}

// Attention projections of layer l, e.g. {"q", "k", "v"} → self_attn.q_proj.weight, ...
// (adjacent in the table: one GEMM).
std::vector<std::string> proj_names(int l, std::initializer_list<const char*> which) {
  std::vector<std::string> n;
  for (const char* w : which) n.push_back(layer_name(l, std::string("self_attn.") + w + "_proj.weight"));
  return n;
}
std::vector<std::string> mlp_names(int l) {
  return {layer_name(l, "mlp.gate_proj.weight"), layer_name(l, "mlp.up_proj.weight")};
}

const LlamaConfig& validated(const LlamaConfig& c) {
  c.validate();
  return c;
}

}  // namespace

std::vector<ParamSpec> LlamaModel::param_table(const LlamaConfig& c, bool no_decay_1d_emb) {
  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, Q = c.q_size(), K = c.kv_size();
  const float sd = float(c.initializer_range);
  const float emb_sd = float(c.embedding_init_std > 0 ? c.embedding_init_std : c.initializer_range);
  const float out_sd = c.scaled_init ? float(c.initializer_range / std::sqrt(2.0 * c.num_hidden_layers)) : sd;
  const bool decay_1d = !no_decay_1d_emb, decay_emb = !no_decay_1d_emb;
  std::vector<ParamSpec> t;
  const int64_t pad_row = c.pad_token_id >= 0 && c.pad_token_id < c.vocab_size ? c.pad_token_id : -1;
  // Hugging Face's named_parameters() order.
  t.push_back({"model.embed_tokens.weight", {V, H}, Init::Normal, emb_sd, decay_emb, pad_row});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    // q/k/v and gate/up back to back: one GEMM each.
    t.push_back({layer_name(l, "self_attn.q_proj.weight"), {Q, H}, Init::Normal, sd, true, -1, true});
    t.push_back({layer_name(l, "self_attn.k_proj.weight"), {K, H}, Init::Normal, sd, true, -1, true});
    t.push_back({layer_name(l, "self_attn.v_proj.weight"), {K, H}, Init::Normal, sd, true});
    t.push_back({layer_name(l, "self_attn.o_proj.weight"), {H, Q}, Init::Normal, out_sd, true});
    t.push_back({layer_name(l, "mlp.gate_proj.weight"), {F, H}, Init::Normal, sd, true, -1, true});
    t.push_back({layer_name(l, "mlp.up_proj.weight"), {F, H}, Init::Normal, sd, true});
    t.push_back({layer_name(l, "mlp.down_proj.weight"), {H, F}, Init::Normal, out_sd, true});
    t.push_back({layer_name(l, "input_layernorm.weight"), {H}, Init::Ones, 0, decay_1d});
    t.push_back({layer_name(l, "post_attention_layernorm.weight"), {H}, Init::Ones, 0, decay_1d});
  }
  t.push_back({"model.norm.weight", {H}, Init::Ones, 0, decay_1d});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, Init::Normal, sd, true});
  return t;
}

ArchSpec LlamaModel::arch(const LlamaConfig& c) {
  ArchSpec s;
  s.hidden = c.hidden_size;
  s.layers = c.num_hidden_layers;
  s.heads = c.num_attention_heads;
  s.kv_heads = c.num_key_value_heads;
  s.head_dim = c.head_size();
  s.ffn = c.intermediate_size;
  s.vocab = c.vocab_size;
  s.parameters = c.num_parameters();
  s.max_positions = c.max_position_embeddings;
  s.norm = NormKind::RMSNorm;
  s.norm_eps = float(c.rms_norm_eps);
  s.mlp = MlpKind::SwiGLU;
  s.causal = true;
  s.rope_inv_freq = c.inv_freq();  // (with the llama3 remap when configured)
  s.embed_weight = "model.embed_tokens.weight";
  s.layer_names = [](int l) {
    LayerParamNames n;
    n.norm1_weight = layer_name(l, "input_layernorm.weight");
    n.qkv_weight = proj_names(l, {"q", "k", "v"});
    n.out_weight = layer_name(l, "self_attn.o_proj.weight");
    n.norm2_weight = layer_name(l, "post_attention_layernorm.weight");
    n.mlp_in_weight = mlp_names(l);
    n.mlp_out_weight = layer_name(l, "mlp.down_proj.weight");
    return n;
  };
  s.final_norm_weight = "model.norm.weight";
  s.decoder_weight = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  return s;
}

LlamaModel::LlamaModel(const LlamaConfig& config, Device device, Precision precision, bool no_decay_1d_emb,
                       ParamShard shard)
    : TransformerLM(param_table(validated(config), no_decay_1d_emb), arch(validated(config)), device, precision, shard),
      cfg_(config) {}

std::unique_ptr<LlamaModel> LlamaModel::from_hf_dir(const std::string& dir, Device device, Precision precision,
                                                    bool no_decay_1d_emb, uint64_t init_seed, ParamShard shard) {
  const HfDirContents hf = read_hf_dir(dir);
  auto m = std::make_unique<LlamaModel>(llama_config_from_hf_json(hf.config_json, hf.config_path), device, precision,
                                        no_decay_1d_emb, shard);
  const bool tied = m->cfg_.tie_word_embeddings;
  auto ignorable = [tied](const std::string& n) {
    return n.find("rotary_emb.inv_freq") != std::string::npos || n.find(".inv_freq") != std::string::npos ||
           (tied && n == "lm_head.weight");  // a redundant copy of the tied embedding
  };
  m->params().init_params(init_seed, load_hf_weights(m->params(), hf, {"model.", ignorable}));  // (a bare LlamaModel lacks the prefix)
  return m;
}

void LlamaModel::save_hf_metadata(const std::string& dir) const {
  write_file_atomic(dir + "/config.json", llama_config_to_hf_json(cfg_));
  write_nucleotide_tokenizer_files(dir, cfg_.max_position_embeddings);
}

}  // namespace biofm
