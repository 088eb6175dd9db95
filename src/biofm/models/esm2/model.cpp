#include "biofm/models/esm2/model.h"

#include <cmath>

#include "biofm/io/atomic_file.h"
#include "biofm/models/esm2/tokenizer_files.h"
#include "biofm/models/hf_dir.h"

namespace biofm {

namespace {

std::string layer_name(int l, const std::string& rest) {
  return "esm.encoder.layer." + std::to_string(l) + "." + rest;
}

// The q, k, v projection parameters of layer l ("weight" or "bias"), adjacent in the table.
std::vector<std::string> qkv_names(int l, const char* what) {
  std::vector<std::string> n;
  for (const char* w : {"query", "key", "value"})
    n.push_back(layer_name(l, std::string("attention.self.") + w + "." + what));
  return n;
}

const Esm2Config& validated(const Esm2Config& c) {
  c.validate();
  return c;
}

}  // namespace

std::vector<ParamSpec> Esm2Model::param_table(const Esm2Config& c) {
  const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const float sd = c.initializer_range;
  std::vector<ParamSpec> t;
  auto linear = [&](const std::string& base, int64_t out, int64_t in) {
    t.push_back({base + ".weight", {out, in}, Init::Normal, sd, true});
    t.push_back({base + ".bias", {out}, Init::Zeros, 0, true});
  };
  auto norm = [&](const std::string& base, int64_t n) {
    t.push_back({base + ".weight", {n}, Init::Ones, 0, true});
    t.push_back({base + ".bias", {n}, Init::Zeros, 0, true});
  };
  t.push_back({"esm.embeddings.word_embeddings.weight", {V, H}, Init::Normal, sd, true, c.pad_token_id});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    // q, k, v weights back to back, then their biases: the fused QKV projection reads each
    // triple as one [3H, H] matrix and one [3H] vector.
    for (const std::string& n : qkv_names(l, "weight"))
      t.push_back({n, {H, H}, Init::Normal, sd, true, -1, /*fuse_with_next=*/n.find("value") == std::string::npos});
    for (const std::string& n : qkv_names(l, "bias"))
      t.push_back({n, {H}, Init::Zeros, 0, true, -1, /*fuse_with_next=*/n.find("value") == std::string::npos});
    linear(layer_name(l, "attention.output.dense"), H, H);
    norm(layer_name(l, "attention.LayerNorm"), H);
    linear(layer_name(l, "intermediate.dense"), F, H);
    linear(layer_name(l, "output.dense"), H, F);
    norm(layer_name(l, "LayerNorm"), H);
  }
  norm("esm.encoder.emb_layer_norm_after", H);
  linear("lm_head.dense", H, H);
  norm("lm_head.layer_norm", H);
  t.push_back({"lm_head.bias", {V}, Init::Zeros, 0, true});
  return t;
}

ArchSpec Esm2Model::arch(const Esm2Config& c) {
  ArchSpec s;
  s.hidden = c.hidden_size;
  s.layers = c.num_hidden_layers;
  s.heads = s.kv_heads = c.num_attention_heads;
  s.head_dim = c.head_dim();
  s.ffn = c.intermediate_size;
  s.vocab = c.vocab_size;
  s.parameters = c.num_parameters();
  s.max_positions = c.max_position_embeddings;
  s.norm = NormKind::LayerNorm;
  s.norm_eps = c.layer_norm_eps;
  s.mlp = MlpKind::Gelu;
  s.causal = false;
  // Same arithmetic as Hugging Face: 1 / 10000^(2i/d) in float32.
  for (int i = 0; i < c.head_dim() / 2; ++i)
    s.rope_inv_freq.push_back(1.0f / std::pow(10000.0f, float(2 * i) / float(c.head_dim())));
  s.embed_weight = "esm.embeddings.word_embeddings.weight";
  s.esm_rescale = true;
  s.mask_token_id = c.token_dropout ? c.mask_token_id : -1;
  s.layer_names = [](int l) {
    LayerParamNames n;
    n.norm1_weight = layer_name(l, "attention.LayerNorm.weight");
    n.norm1_bias = layer_name(l, "attention.LayerNorm.bias");
    n.qkv_weight = qkv_names(l, "weight");
    n.qkv_bias = qkv_names(l, "bias");
    n.out_weight = layer_name(l, "attention.output.dense.weight");
    n.out_bias = layer_name(l, "attention.output.dense.bias");
    n.norm2_weight = layer_name(l, "LayerNorm.weight");
    n.norm2_bias = layer_name(l, "LayerNorm.bias");
    n.mlp_in_weight = {layer_name(l, "intermediate.dense.weight")};
    n.mlp_in_bias = layer_name(l, "intermediate.dense.bias");
    n.mlp_out_weight = layer_name(l, "output.dense.weight");
    n.mlp_out_bias = layer_name(l, "output.dense.bias");
    return n;
  };
  s.final_norm_weight = "esm.encoder.emb_layer_norm_after.weight";
  s.final_norm_bias = "esm.encoder.emb_layer_norm_after.bias";
  s.head_dense_weight = "lm_head.dense.weight";
  s.head_dense_bias = "lm_head.dense.bias";
  s.head_norm_weight = "lm_head.layer_norm.weight";
  s.head_norm_bias = "lm_head.layer_norm.bias";
  s.decoder_weight = "esm.embeddings.word_embeddings.weight";  // tied
  s.decoder_bias = "lm_head.bias";
  return s;
}

Esm2Model::Esm2Model(const Esm2Config& config, Device device, Precision precision, ParamShard shard)
    : TransformerLM(param_table(validated(config)), arch(validated(config)), device, precision, shard), cfg_(config) {}

std::unique_ptr<Esm2Model> Esm2Model::from_hf_dir(const std::string& dir, Device device, Precision precision,
                                                  uint64_t init_seed, ParamShard shard) {
  const HfDirContents hf = read_hf_dir(dir);
  check_esm2_vocab_file(dir);
  auto m = std::make_unique<Esm2Model>(esm2_config_from_hf_json(hf.config_json, hf.config_path), device, precision,
                                       shard);
  auto ignorable = [](const std::string& n) {
    return n.rfind("esm.contact_head.", 0) == 0 || n.find("inv_freq") != std::string::npos ||
           n.find("position_ids") != std::string::npos || n == "lm_head.decoder.weight";
  };
  std::vector<SafetensorsSource> contact_head;
  m->params().init_params(init_seed, load_hf_weights(m->params(), hf, {"esm.", ignorable}, &contact_head));  // (a bare EsmModel lacks the prefix)
  m->carry_tensors(std::move(contact_head));
  return m;
}

void Esm2Model::save_hf_metadata(const std::string& dir) const {
  write_file_atomic(dir + "/config.json", esm2_config_to_hf_json(cfg_));
  write_esm2_tokenizer_files(dir, cfg_.max_position_embeddings);
}

}  // namespace biofm
