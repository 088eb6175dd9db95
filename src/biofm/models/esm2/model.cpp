#include "biofm/models/esm2/model.h"

#include <cmath>
#include <filesystem>

#include "biofm/io/atomic_file.h"
#include "biofm/models/hf_dir.h"
#include "biofm/models/esm2/tokenizer_files.h"
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
  return "esm.encoder.layer." + std::to_string(l) + "." + rest;
}

Tensor f32(const Shape& s, Device d) { return Tensor::empty(s, DType::F32, d); }

// The q, k, v projection parameters of layer l ("weight" or "bias"), adjacent in the table.
std::vector<std::string> qkv_names(int l, const char* what) {
  std::vector<std::string> n;
  for (const char* w : {"query", "key", "value"})
    n.push_back(layer_name(l, std::string("attention.self.") + w + "." + what));
  return n;
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
    // triple as one [3H, H] matrix and one [3H] vector (ParamStore::weight_concat).
    for (const char* w : {"query", "key", "value"})
      t.push_back({layer_name(l, std::string("attention.self.") + w + ".weight"), {H, H}, Init::Normal, sd, true,
                   -1, /*fuse_with_next=*/w[0] != 'v'});
    for (const char* w : {"query", "key", "value"})
      t.push_back({layer_name(l, std::string("attention.self.") + w + ".bias"), {H}, Init::Zeros, 0, true, -1,
                   /*fuse_with_next=*/w[0] != 'v'});
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

Esm2Model::Esm2Model(const Esm2Config& config, Device device, Precision precision)
    : cfg_(config), params_(param_table(config), device, master_dtype(precision)) {
  cfg_.validate();
  if (precision != Precision::F32) {
    if (device == Device::CPU)
      fail(precision_name(precision), " precision needs the CUDA backend (the CPU backend computes in fp32)");
    // bf16-mixed: fp32 masters plus a bf16 compute copy; bf16: the masters are bf16 already.
    if (precision == Precision::Bf16Mixed) params_.enable_compute_copy();
    act_dtype_ = DType::BF16;
  }
  const int half = cfg_.head_dim() / 2;
  std::vector<float> f(static_cast<size_t>(half));
  // Same arithmetic as Hugging Face: 1 / 10000^(2i/d) in float32.
  for (int i = 0; i < half; ++i)
    f[size_t(i)] = 1.0f / std::pow(10000.0f, float(2 * i) / float(cfg_.head_dim()));
  inv_freq_ = Tensor::from_f32({half}, f).to(device);
}

ModelDims Esm2Model::dims() const {
  return {cfg_.hidden_size, cfg_.num_hidden_layers, cfg_.vocab_size, cfg_.intermediate_size,
          cfg_.num_attention_heads, cfg_.num_attention_heads, cfg_.num_parameters()};
}

std::unique_ptr<Esm2Model> Esm2Model::from_hf_dir(const std::string& dir, Device device, Precision precision) {
  const HfDirContents hf = read_hf_dir(dir);
  auto m = std::make_unique<Esm2Model>(esm2_config_from_hf_json(hf.config_json, hf.config_path), device, precision);
  auto ignorable = [](const std::string& n) {
    return n.rfind("esm.contact_head.", 0) == 0 || n.find("inv_freq") != std::string::npos ||
           n.find("position_ids") != std::string::npos || n == "lm_head.decoder.weight";
  };
  load_hf_weights(m->params_, hf, {"esm.", ignorable});  // (a bare base model lacks the prefix)
  return m;
}

void Esm2Model::save_hf_metadata(const std::string& dir) const {
  write_file_atomic(dir + "/config.json", esm2_config_to_hf_json(cfg_));
  write_esm2_tokenizer_files(dir, cfg_.max_position_embeddings);
}

// The activations a kept layer can drop and redo in backward for one cheap pass each.
void Esm2Model::norm1(int l, LayerActs& a) {
  a.ln1 = act(a.x_in.shape());
  ops::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, a.x_in, params_.weight(layer_name(l, "attention.LayerNorm.weight")),
                         params_.weight(layer_name(l, "attention.LayerNorm.bias")), cfg_.layer_norm_eps);
}
void Esm2Model::norm2(int l, LayerActs& a) {
  a.ln2 = act(a.x_mid.shape());
  ops::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.x_mid, params_.weight(layer_name(l, "LayerNorm.weight")),
                         params_.weight(layer_name(l, "LayerNorm.bias")), cfg_.layer_norm_eps);
}
void Esm2Model::gelu(LayerActs& a) {
  a.act = act(a.fc1.shape());
  ops::gelu_forward(a.act, a.fc1, ops::GeluKind::Erf);
}

void Esm2Model::layer_forward(int l, const Batch& b, const Tensor& x, LayerActs& a, Tensor* x_out) {
  const int64_t T = x.size(0), H = cfg_.hidden_size, F = cfg_.intermediate_size;
  const int64_t nh = cfg_.num_attention_heads, hd = cfg_.head_dim();
  const Device dev = x.device();
  auto P = [&](const std::string& rest) { return params_.weight(layer_name(l, rest)); };

  a.x_in = x;
  a.ln1_mean = f32({T}, dev);
  a.ln1_rstd = f32({T}, dev);
  norm1(l, a);
  {
    Tensor qkv = act({T, 3 * H});  // one GEMM for q | k | v, then rope while splitting
    linears_.forward(qkv, a.ln1, params_.weight_concat(qkv_names(l, "weight")),
                     params_.weight_concat(qkv_names(l, "bias")), Tensor(), a.fp8.slot(a.fp8.qkv));
    a.q = act({T, nh, hd});
    a.k = act({T, nh, hd});
    a.v = act({T, nh, hd});
    ops::rope_unpack_qkv(a.q, a.k, a.v, qkv, b.positions, inv_freq_);
  }
  a.attn = act({T, nh, hd});
  a.lse = f32({T, nh}, dev);
  ops::AttentionShape as{1.0f / std::sqrt(float(hd)), false, b.max_seqlen};
  ops::attention_forward(a.attn, a.lse, a.q, a.k, a.v, b.cu_seqlens, b.seq_lens, as);

  a.x_mid = act({T, H});
  linears_.forward(a.x_mid, a.attn.view({T, H}), P("attention.output.dense.weight"),
                   P("attention.output.dense.bias"), /*residual=*/x, a.fp8.slot(a.fp8.o));

  a.ln2_mean = f32({T}, dev);
  a.ln2_rstd = f32({T}, dev);
  norm2(l, a);
  a.fc1 = act({T, F});
  linears_.forward(a.fc1, a.ln2, P("intermediate.dense.weight"), P("intermediate.dense.bias"), Tensor(),
                   a.fp8.slot(a.fp8.mlp_in));
  gelu(a);
  if (!x_out) return;  // recompute in backward: the layer output is not needed
  *x_out = act({T, H});
  linears_.forward(*x_out, a.act, P("output.dense.weight"), P("output.dense.bias"), /*residual=*/a.x_mid,
                   a.fp8.slot(a.fp8.mlp_out));
}

void Esm2Model::forward_trunk(const Batch& b, Acts& acts, bool keep) {
  const int64_t T = b.num_rows(), H = cfg_.hidden_size;
  const Device dev = device();
  if (b.input_ids.device() != dev) fail("batch is on ", device_name(b.input_ids.device()),
                                        ", model on ", device_name(dev));
  Tensor x = act({T, H});
  ops::embedding_forward(x, b.input_ids, params_.weight("esm.embeddings.word_embeddings.weight"));
  acts.token_scale = f32({T}, dev);
  if (cfg_.token_dropout) {
    ops::esm_token_dropout_forward(x, acts.token_scale, b.input_ids, b.cu_seqlens, b.seq_lens,
                                   cfg_.mask_token_id);
  } else {
    // Still zero the padding rows, as Hugging Face multiplies by the attention mask.
    ops::esm_token_dropout_forward(x, acts.token_scale, b.input_ids, b.cu_seqlens, b.seq_lens, -1);
  }
  acts.layers.assign(keep ? size_t(cfg_.num_hidden_layers) : 1, LayerActs{});
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    LayerActs& a = acts.layers[keep ? size_t(l) : 0];
    a.fp8.keep = keep && recompute_layers_ == 0;  // (recompute and lean layers quantize again)
    Tensor x_out;
    layer_forward(l, b, x, a, &x_out);
    if (keep && l < recompute_layers_) {  // backward recomputes the rest from the layer input
      a = LayerActs{};
      a.x_in = x;
    } else if (keep && recompute_layers_ > 0) {  // memory is short: drop what is cheap to redo
      a.ln1 = a.ln2 = a.act = Tensor();
    }
    x = x_out;
  }
  HeadActs& h = acts.head;
  h.x_last = x;
  h.final_out = act({T, H});
  h.final_mean = f32({T}, dev);
  h.final_rstd = f32({T}, dev);
  ops::layernorm_forward(h.final_out, h.final_mean, h.final_rstd, x,
                         params_.weight("esm.encoder.emb_layer_norm_after.weight"),
                         params_.weight("esm.encoder.emb_layer_norm_after.bias"), cfg_.layer_norm_eps);
}

Tensor Esm2Model::forward_head(Acts& acts) {
  HeadActs& h = acts.head;
  const int64_t T = h.final_out.size(0), H = cfg_.hidden_size, V = cfg_.vocab_size;
  const Device dev = device();
  h.dense = act({T, H});
  ops::linear_forward(h.dense, h.final_out, params_.weight("lm_head.dense.weight"),
                      params_.weight("lm_head.dense.bias"));
  h.act = act({T, H});
  ops::gelu_forward(h.act, h.dense, ops::GeluKind::Erf);
  h.head_out = act({T, H});
  h.head_mean = f32({T}, dev);
  h.head_rstd = f32({T}, dev);
  ops::layernorm_forward(h.head_out, h.head_mean, h.head_rstd, h.act,
                         params_.weight("lm_head.layer_norm.weight"),
                         params_.weight("lm_head.layer_norm.bias"), cfg_.layer_norm_eps);
  Tensor logits = act({T, V});
  ops::linear_forward(logits, h.head_out, params_.weight("esm.embeddings.word_embeddings.weight"),
                      params_.weight("lm_head.bias"));
  return logits;
}

Tensor Esm2Model::hidden_states(const Batch& b) {
  Acts acts;
  forward_trunk(b, acts, false);
  return acts.head.final_out;
}

Tensor Esm2Model::logits(const Batch& b) {
  Acts acts;
  forward_trunk(b, acts, false);
  return forward_head(acts);
}

LossSums Esm2Model::evaluate(const Batch& b, bool count_correct) {
  Tensor lg = logits(b);
  Tensor token_loss = f32({b.num_rows()}, device());
  Tensor none;
  ops::cross_entropy_forward_backward(token_loss, none, lg, b.labels, 0.0f);
  return sum_losses(token_loss, lg, b.labels, count_correct);
}

Tensor Esm2Model::token_losses(const Batch& b) {
  Tensor lg = logits(b);
  Tensor token_loss = f32({b.num_rows()}, device());
  Tensor none;
  ops::cross_entropy_forward_backward(token_loss, none, lg, b.labels, 0.0f);
  return token_loss;
}

void Esm2Model::layer_backward(int l, const Batch& b, LayerActs& a, Tensor& dx) {
  // dx: gradient w.r.t. this layer's output on entry, w.r.t. its input on exit.
  if (!a.q.defined()) {
    layer_forward(l, b, a.x_in, a, nullptr);  // recompute: only the input was kept
  } else if (!a.ln1.defined()) {  // a kept layer that dropped its norm and GELU outputs
    norm1(l, a);
    norm2(l, a);
    gelu(a);
  }
  const int64_t T = dx.size(0), H = cfg_.hidden_size, F = cfg_.intermediate_size;
  const int64_t nh = cfg_.num_attention_heads, hd = cfg_.head_dim();
  auto P = [&](const std::string& rest) { return params_.weight(layer_name(l, rest)); };
  auto G = [&](const std::string& rest) { return params_.grad(layer_name(l, rest)); };
  Tensor none;

  // MLP: x_out = x_mid + W2·gelu(W1·LN2(x_mid) + b1) + b2
  Tensor dact = act({T, F});
  Tensor gw2 = G("output.dense.weight"), gb2 = G("output.dense.bias");
  linears_.backward(dact, gw2, gb2, dx, a.act, P("output.dense.weight"), &a.fp8.mlp_out);
  ops::gelu_backward(dact, dact, a.fc1, ops::GeluKind::Erf);
  Tensor dln2 = act({T, H});
  Tensor gw1 = G("intermediate.dense.weight"), gb1 = G("intermediate.dense.bias");
  linears_.backward(dln2, gw1, gb1, dact, a.ln2, P("intermediate.dense.weight"), &a.fp8.mlp_in);
  Tensor dmid = act({T, H});
  Tensor gln2w = G("LayerNorm.weight"), gln2b = G("LayerNorm.bias");
  ops::layernorm_backward(dmid, gln2w, gln2b, dln2, a.x_mid, P("LayerNorm.weight"), a.ln2_mean,
                          a.ln2_rstd, /*dres=*/dx);

  // Attention: x_mid = x_in + Wo·Attn(rope(Wq·LN1), rope(Wk·LN1), Wv·LN1) + bo
  Tensor dattn = act({T, H});
  Tensor gwo = G("attention.output.dense.weight"), gbo = G("attention.output.dense.bias");
  linears_.backward(dattn, gwo, gbo, dmid, a.attn.view({T, H}), P("attention.output.dense.weight"), &a.fp8.o);
  Tensor dq = act({T, nh, hd}), dk = act({T, nh, hd}), dv = act({T, nh, hd});
  ops::AttentionShape as{1.0f / std::sqrt(float(hd)), false, b.max_seqlen};
  ops::attention_backward(dq, dk, dv, dattn.view({T, nh, hd}), a.q, a.k, a.v, a.attn, a.lse,
                          b.cu_seqlens, b.seq_lens, as);
  Tensor dqkv = act({T, 3 * H});
  ops::rope_pack_qkv_grad(dqkv, dq, dk, dv, b.positions, inv_freq_);
  dq = dk = dv = Tensor();
  Tensor dln1 = act({T, H});
  Tensor gqkv = params_.grad_concat(qkv_names(l, "weight")), gqkv_b = params_.grad_concat(qkv_names(l, "bias"));
  linears_.backward(dln1, gqkv, gqkv_b, dqkv, a.ln1, params_.weight_concat(qkv_names(l, "weight")), &a.fp8.qkv);
  Tensor gln1w = G("attention.LayerNorm.weight"), gln1b = G("attention.LayerNorm.bias");
  ops::layernorm_backward(dx, gln1w, gln1b, dln1, a.x_in, P("attention.LayerNorm.weight"),
                          a.ln1_mean, a.ln1_rstd, /*dres=*/dmid);
}

void Esm2Model::forward_backward(const Batch& b, float grad_scale, Tensor& loss_acc) {
  const int64_t T = b.num_rows(), H = cfg_.hidden_size;
  const Device dev = device();
  Acts acts;
  forward_trunk(b, acts, true);
  Tensor lg = forward_head(acts);
  Tensor token_loss = f32({T}, dev);
  ops::cross_entropy_forward_backward(token_loss, lg, lg, b.labels, grad_scale);
  ops::sum_accumulate(loss_acc, token_loss);  // ignored rows hold 0
  Tensor& dlogits = lg;  // the loss wrote its gradient in place

  // LM head, in reverse.
  HeadActs& h = acts.head;
  Tensor gE = params_.grad("esm.embeddings.word_embeddings.weight");
  Tensor gbias = params_.grad("lm_head.bias");
  Tensor dhead = act({T, H});
  ops::linear_backward(dhead, gE, gbias, dlogits, h.head_out,
                       params_.weight("esm.embeddings.word_embeddings.weight"));
  Tensor dact = act({T, H});
  Tensor ghw = params_.grad("lm_head.layer_norm.weight"), ghb = params_.grad("lm_head.layer_norm.bias");
  ops::layernorm_backward(dact, ghw, ghb, dhead, h.act, params_.weight("lm_head.layer_norm.weight"),
                          h.head_mean, h.head_rstd);
  ops::gelu_backward(dact, dact, h.dense, ops::GeluKind::Erf);
  Tensor dfinal = act({T, H});
  Tensor gdw = params_.grad("lm_head.dense.weight"), gdb = params_.grad("lm_head.dense.bias");
  ops::linear_backward(dfinal, gdw, gdb, dact, h.final_out, params_.weight("lm_head.dense.weight"));
  Tensor dx = act({T, H});
  Tensor gfw = params_.grad("esm.encoder.emb_layer_norm_after.weight");
  Tensor gfb = params_.grad("esm.encoder.emb_layer_norm_after.bias");
  ops::layernorm_backward(dx, gfw, gfb, dfinal, h.x_last,
                          params_.weight("esm.encoder.emb_layer_norm_after.weight"), h.final_mean,
                          h.final_rstd);

  for (int l = cfg_.num_hidden_layers - 1; l >= 0; --l) {
    layer_backward(l, b, acts.layers[size_t(l)], dx);
    acts.layers[size_t(l)] = LayerActs{};  // free as we go
  }
  ops::scale_rows_inplace(dx, acts.token_scale);
  ops::embedding_backward(gE, dx, b.input_ids);
}

}  // namespace biofm
