#include "biofm/models/llama/model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "biofm/io/atomic_file.h"
#include "biofm/models/hf_dir.h"
#include "biofm/models/llama/tokenizer_files.h"
#include "biofm/ops/activation/op.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/embedding/op.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/loss/op.h"
#include "biofm/ops/norm/op.h"
#include "biofm/ops/rope/op.h"

namespace biofm {

namespace {

std::string layer_name(int l, const std::string& rest) {
  return "model.layers." + std::to_string(l) + "." + rest;
}

Tensor f32(const Shape& s, Device d) { return Tensor::empty(s, DType::F32, d); }

// Attention projections of layer l, e.g. {"q", "k", "v"} → self_attn.q_proj.weight, ...
// (adjacent in the table, so ParamStore::weight_concat stacks them for one fused GEMM).
std::vector<std::string> proj_names(int l, std::initializer_list<const char*> which) {
  std::vector<std::string> n;
  for (const char* w : which) n.push_back(layer_name(l, std::string("self_attn.") + w + "_proj.weight"));
  return n;
}
std::vector<std::string> mlp_names(int l) {
  return {layer_name(l, "mlp.gate_proj.weight"), layer_name(l, "mlp.up_proj.weight")};
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
    // q/k/v and gate/up back to back: one GEMM each (ParamStore::weight_concat).
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

LlamaModel::LlamaModel(const LlamaConfig& config, Device device, Precision precision, bool no_decay_1d_emb)
    : cfg_((config.validate(), config)),
      params_(param_table(config, no_decay_1d_emb), device, master_dtype(precision)) {
  if (precision != Precision::F32) {
    if (device == Device::CPU)
      fail(precision_name(precision), " precision needs the CUDA backend (the CPU backend computes in fp32)");
    // bf16-mixed: fp32 masters plus a bf16 compute copy; bf16: the masters are bf16 already.
    if (precision == Precision::Bf16Mixed) params_.enable_compute_copy();
    act_dtype_ = DType::BF16;
  }
  const std::vector<float> f = cfg_.inv_freq();
  inv_freq_ = Tensor::from_f32({int64_t(f.size())}, f).to(device);
  if (cfg_.tie_word_embeddings) lm_head_name_ = embed_name_;
}

const std::string& LlamaModel::head_weight_name() const { return lm_head_name_; }

ModelDims LlamaModel::dims() const {
  return {cfg_.hidden_size,         cfg_.num_hidden_layers,   cfg_.vocab_size,      cfg_.intermediate_size,
          cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.num_parameters()};
}

std::unique_ptr<LlamaModel> LlamaModel::from_hf_dir(const std::string& dir, Device device, Precision precision,
                                                    bool no_decay_1d_emb) {
  const HfDirContents hf = read_hf_dir(dir);
  auto m = std::make_unique<LlamaModel>(llama_config_from_hf_json(hf.config_json, hf.config_path), device, precision,
                                        no_decay_1d_emb);
  const bool tied = m->cfg_.tie_word_embeddings;
  auto ignorable = [tied](const std::string& n) {
    return n.find("rotary_emb.inv_freq") != std::string::npos || n.find(".inv_freq") != std::string::npos ||
           (tied && n == "lm_head.weight");  // a redundant copy of the tied embedding
  };
  load_hf_weights(m->params_, hf, {"model.", ignorable});  // (a bare base model lacks the prefix)
  return m;
}

void LlamaModel::save_hf_metadata(const std::string& dir) const {
  write_file_atomic(dir + "/config.json", llama_config_to_hf_json(cfg_));
  write_nucleotide_tokenizer_files(dir, cfg_.max_position_embeddings);
}

// The activations a kept layer can drop and redo in backward for one cheap pass each.
void LlamaModel::norm1(int l, LayerActs& a) {
  a.n1 = act(a.x_in.shape());
  if (linears_.fp8()) a.n1_amax = f32({1}, a.n1.device());  // the q|k|v quantization reuses it
  ops::rmsnorm_forward(a.n1, a.rstd1, a.x_in, params_.weight(layer_name(l, "input_layernorm.weight")),
                       float(cfg_.rms_norm_eps), a.n1_amax);
}
void LlamaModel::norm2(int l, LayerActs& a) {
  a.n2 = act(a.x_mid.shape());
  if (linears_.fp8()) a.n2_amax = f32({1}, a.n2.device());
  ops::rmsnorm_forward(a.n2, a.rstd2, a.x_mid, params_.weight(layer_name(l, "post_attention_layernorm.weight")),
                       float(cfg_.rms_norm_eps), a.n2_amax);
}
void LlamaModel::swiglu(LayerActs& a) {
  a.h = act({a.gate_up.size(0), a.gate_up.size(1) / 2});
  if (linears_.fp8()) a.h_amax = f32({1}, a.h.device());  // the down projection's quantization reuses it
  ops::swiglu_forward_packed(a.h, a.gate_up, a.h_amax);
}

void LlamaModel::layer_forward(int l, const Batch& b, const Tensor& x, LayerActs& a, Tensor* x_out,
                               LlamaKvCache* cache) {
  const int64_t T = x.size(0), H = cfg_.hidden_size, F = cfg_.intermediate_size;
  const int64_t nh = cfg_.num_attention_heads, nkv = cfg_.num_key_value_heads, hd = cfg_.head_size();
  const int64_t Q = cfg_.q_size(), K = cfg_.kv_size();
  const Device dev = x.device();
  auto P = [&](const std::string& rest) { return params_.weight(layer_name(l, rest)); };
  Tensor none;

  a.x_in = x;
  a.rstd1 = f32({T}, dev);
  norm1(l, a);
  {
    Tensor qkv = act({T, Q + 2 * K});  // one GEMM for q | k | v, then rope while splitting
    linears_.forward(qkv, a.n1, params_.weight_concat(proj_names(l, {"q", "k", "v"})), none, none,
                     a.fp8.slot(a.fp8.qkv), a.n1_amax);
    a.q = act({T, nh, hd});
    a.k = act({T, nkv, hd});
    a.v = act({T, nkv, hd});
    ops::rope_unpack_qkv(a.q, a.k, a.v, qkv, b.positions, inv_freq_);
  }
  a.attn = act({T, nh, hd});
  const float scale = 1.0f / std::sqrt(float(hd));
  if (cache) {
    const int64_t p0 = cache->length;
    Tensor kdst = cache->k[size_t(l)].narrow0(p0, T), vdst = cache->v[size_t(l)].narrow0(p0, T);
    kdst.copy_from(a.k);
    vdst.copy_from(a.v);
  }
  if (cache && cache->length > 0) {
    // Decoding: the new rows (positions length .. length+T-1) against the cache rows
    // [0, length+T), which now include their own keys/values.
    ops::attention_decode(a.attn, a.q, cache->k[size_t(l)], cache->v[size_t(l)], cache->length + T,
                          cache->length, scale);
  } else {
    a.lse = f32({T, nh}, dev);
    ops::AttentionShape as{scale, true, b.max_seqlen};
    ops::attention_forward(a.attn, a.lse, a.q, a.k, a.v, b.cu_seqlens, b.seq_lens, as);
  }

  a.x_mid = act({T, H});
  linears_.forward(a.x_mid, a.attn.view({T, Q}), P("self_attn.o_proj.weight"), none, /*residual=*/x,
                   a.fp8.slot(a.fp8.o));

  a.rstd2 = f32({T}, dev);
  norm2(l, a);
  a.gate_up = act({T, 2 * F});  // one GEMM for gate | up
  linears_.forward(a.gate_up, a.n2, params_.weight_concat(mlp_names(l)), none, none, a.fp8.slot(a.fp8.mlp_in),
                   a.n2_amax);
  swiglu(a);
  if (!x_out) return;  // recompute in backward: the layer output is not needed
  *x_out = act({T, H});
  linears_.forward(*x_out, a.h, P("mlp.down_proj.weight"), none, /*residual=*/a.x_mid, a.fp8.slot(a.fp8.mlp_out),
                   a.h_amax);
}

void LlamaModel::forward_trunk(const Batch& b, Acts& acts, bool keep, LlamaKvCache* cache) {
  const int64_t T = b.num_rows(), H = cfg_.hidden_size;
  const Device dev = device();
  if (b.input_ids.device() != dev)
    fail("batch is on ", device_name(b.input_ids.device()), ", model on ", device_name(dev));
  Tensor x = act({T, H});
  ops::embedding_forward(x, b.input_ids, params_.weight(embed_name_));
  acts.layers.assign(keep ? size_t(cfg_.num_hidden_layers) : 1, LayerActs{});
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    LayerActs& a = acts.layers[keep ? size_t(l) : 0];
    a.fp8.keep = keep && recompute_layers_ == 0;  // (recompute and lean layers quantize again)
    Tensor x_out;
    layer_forward(l, b, x, a, &x_out, cache);
    if (keep && l < recompute_layers_) {  // backward recomputes the rest
      a = LayerActs{};
      a.x_in = x;
    } else if (keep && recompute_layers_ > 0) {  // memory is short: drop what is cheap to redo
      a.n1 = a.n2 = a.h = Tensor();
    }
    x = x_out;
  }
  if (!keep) acts.layers.clear();
  acts.x_last = x;
  acts.final_out = act({T, H});
  acts.final_rstd = f32({T}, dev);
  ops::rmsnorm_forward(acts.final_out, acts.final_rstd, x, params_.weight("model.norm.weight"),
                       float(cfg_.rms_norm_eps));
}

Tensor LlamaModel::forward_head(const Acts& acts) {
  const int64_t T = acts.final_out.size(0), V = cfg_.vocab_size;
  Tensor logits = act({T, V}), none;
  ops::linear_forward(logits, acts.final_out, params_.weight(head_weight_name()), none);
  return logits;
}

Tensor LlamaModel::hidden_states(const Batch& b) {
  Acts acts;
  forward_trunk(b, acts, false);
  return acts.final_out;
}

Tensor LlamaModel::logits(const Batch& b) {
  Acts acts;
  forward_trunk(b, acts, false);
  return forward_head(acts);
}

LossSums LlamaModel::evaluate(const Batch& b, bool count_correct) {
  Tensor lg = logits(b);
  Tensor token_loss = f32({b.num_rows()}, device()), none;
  ops::cross_entropy_forward_backward(token_loss, none, lg, b.labels, 0.0f);
  return sum_losses(token_loss, lg, b.labels, count_correct);
}

Tensor LlamaModel::token_losses(const Batch& b) {
  Tensor lg = logits(b);
  Tensor token_loss = f32({b.num_rows()}, device()), none;
  ops::cross_entropy_forward_backward(token_loss, none, lg, b.labels, 0.0f);
  return token_loss;
}

void LlamaModel::layer_backward(int l, const Batch& b, LayerActs& a, Tensor& dx) {
  // dx: gradient w.r.t. this layer's output on entry, w.r.t. its input on exit.
  if (!a.q.defined()) {
    layer_forward(l, b, a.x_in, a, nullptr);  // recompute: only the input was kept
  } else if (!a.n1.defined()) {  // a kept layer that dropped its norm and SwiGLU outputs
    norm1(l, a);
    norm2(l, a);
    swiglu(a);
  }
  const int64_t T = dx.size(0), H = cfg_.hidden_size, F = cfg_.intermediate_size;
  const int64_t nh = cfg_.num_attention_heads, nkv = cfg_.num_key_value_heads, hd = cfg_.head_size();
  const int64_t Q = cfg_.q_size(), K = cfg_.kv_size();
  auto P = [&](const std::string& rest) { return params_.weight(layer_name(l, rest)); };
  auto G = [&](const std::string& rest) { return params_.grad(layer_name(l, rest)); };
  Tensor none;

  // MLP: x_out = x_mid + W_down·(silu(W_gate·n2) ⊙ W_up·n2), n2 = RMSNorm2(x_mid)
  Tensor dh = act({T, F});
  Tensor g_down = G("mlp.down_proj.weight");
  linears_.backward(dh, g_down, none, dx, a.h, P("mlp.down_proj.weight"), &a.fp8.mlp_out);
  Tensor dgate_up = act({T, 2 * F});
  Tensor dgate_up_amax = linears_.fp8() ? f32({1}, dh.device()) : Tensor();
  ops::swiglu_backward_packed(dgate_up, dh, a.gate_up, dgate_up_amax);
  dh = Tensor();
  Tensor dn2 = act({T, H});
  Tensor g_gate_up = params_.grad_concat(mlp_names(l));
  linears_.backward(dn2, g_gate_up, none, dgate_up, a.n2, params_.weight_concat(mlp_names(l)), &a.fp8.mlp_in,
                    dgate_up_amax);
  dgate_up = Tensor();
  Tensor dmid = act({T, H});
  Tensor g_post = G("post_attention_layernorm.weight");
  ops::rmsnorm_backward(dmid, g_post, dn2, a.x_mid, P("post_attention_layernorm.weight"), a.rstd2,
                        /*dres=*/dx);

  // Attention: x_mid = x_in + W_o·Attn(rope(W_q·n1), rope(W_k·n1), W_v·n1), n1 = RMSNorm1(x_in)
  Tensor dattn = act({T, Q});
  Tensor g_o = G("self_attn.o_proj.weight");
  linears_.backward(dattn, g_o, none, dmid, a.attn.view({T, Q}), P("self_attn.o_proj.weight"), &a.fp8.o);
  Tensor dq = act({T, nh, hd}), dk = act({T, nkv, hd}), dv = act({T, nkv, hd});
  ops::AttentionShape as{1.0f / std::sqrt(float(hd)), true, b.max_seqlen};
  ops::attention_backward(dq, dk, dv, dattn.view({T, nh, hd}), a.q, a.k, a.v, a.attn, a.lse, b.cu_seqlens,
                          b.seq_lens, as);
  Tensor dqkv = act({T, Q + 2 * K});
  ops::rope_pack_qkv_grad(dqkv, dq, dk, dv, b.positions, inv_freq_);
  dq = dk = dv = Tensor();
  Tensor dn1 = act({T, H});
  const std::vector<std::string> qkv = proj_names(l, {"q", "k", "v"});
  Tensor g_qkv = params_.grad_concat(qkv);
  linears_.backward(dn1, g_qkv, none, dqkv, a.n1, params_.weight_concat(qkv), &a.fp8.qkv);
  Tensor g_in = G("input_layernorm.weight");
  ops::rmsnorm_backward(dx, g_in, dn1, a.x_in, P("input_layernorm.weight"), a.rstd1, /*dres=*/dmid);
}

void LlamaModel::forward_backward(const Batch& b, float grad_scale, Tensor& loss_acc) {
  const int64_t T = b.num_rows(), H = cfg_.hidden_size;
  const Device dev = device();
  Acts acts;
  forward_trunk(b, acts, true);
  Tensor lg = forward_head(acts);
  Tensor token_loss = f32({T}, dev);
  ops::cross_entropy_forward_backward(token_loss, lg, lg, b.labels, grad_scale);
  ops::sum_accumulate(loss_acc, token_loss);  // ignored rows hold 0
  Tensor& dlogits = lg;  // the loss wrote its gradient in place
  Tensor none;

  // lm_head (the embedding matrix when tied: its gradient then sums both uses), final norm.
  Tensor g_head = params_.grad(head_weight_name());
  Tensor dfinal = act({T, H});
  ops::linear_backward(dfinal, g_head, none, dlogits, acts.final_out, params_.weight(head_weight_name()));
  lg = Tensor();
  Tensor dx = act({T, H});
  Tensor g_norm = params_.grad("model.norm.weight");
  ops::rmsnorm_backward(dx, g_norm, dfinal, acts.x_last, params_.weight("model.norm.weight"), acts.final_rstd);
  dfinal = Tensor();

  for (int l = cfg_.num_hidden_layers - 1; l >= 0; --l) {
    layer_backward(l, b, acts.layers[size_t(l)], dx);
    acts.layers[size_t(l)] = LayerActs{};  // free as we go
  }
  Tensor g_emb = params_.grad(embed_name_);
  ops::embedding_backward(g_emb, dx, b.input_ids);
}

LlamaKvCache LlamaModel::new_cache(int64_t capacity) const {
  if (capacity <= 0) fail("KV cache capacity must be positive, got ", capacity);
  LlamaKvCache c;
  c.capacity = capacity;
  const int64_t nkv = cfg_.num_key_value_heads, hd = cfg_.head_size();
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    c.k.push_back(Tensor::zeros({capacity, nkv, hd}, act_dtype_, device()));
    c.v.push_back(Tensor::zeros({capacity, nkv, hd}, act_dtype_, device()));
  }
  return c;
}

Tensor LlamaModel::forward_cached(const std::vector<int32_t>& ids, LlamaKvCache& cache) {
  const int64_t n = int64_t(ids.size());
  if (n == 0) fail("forward_cached: no tokens");
  if (cache.length + n > cache.capacity)
    fail("KV cache full: ", cache.length, " + ", n, " tokens exceed its capacity ", cache.capacity);
  if (int64_t(cache.k.size()) != cfg_.num_hidden_layers) fail("KV cache was not made by this model");
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = int32_t(cache.length + i);
  Batch b;
  b.input_ids = Tensor::from_i32({n}, ids);
  b.labels = Tensor::from_i32({n}, std::vector<int32_t>(size_t(n), ops::kIgnoreIndex));
  b.positions = Tensor::from_i32({n}, pos);
  b.cu_seqlens = Tensor::from_i32({2}, {0, int32_t(n)});
  b.seq_lens = Tensor::from_i32({1}, {int32_t(n)});
  b.max_seqlen = int32_t(n);
  b.num_real_tokens = n;
  b = b.to(device());
  Acts acts;
  forward_trunk(b, acts, false, &cache);
  cache.length += n;
  return forward_head(acts);
}

}  // namespace biofm
