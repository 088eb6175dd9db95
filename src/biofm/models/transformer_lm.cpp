#include "biofm/models/transformer_lm.h"

#include <algorithm>

#include "biofm/core/profiling.h"
#include "biofm/core/side_stream.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/fp8/delayed.h"
#include "biofm/ops/loss/op.h"
#include "biofm/ops/options.h"

namespace biofm {

namespace {

// Every parameter name of a layer, for its flat range.
std::vector<std::string> all_names(const LayerParamNames& n) {
  std::vector<std::string> v{n.norm1_weight, n.norm1_bias, n.out_weight,  n.out_bias,      n.norm2_weight,
                             n.norm2_bias,   n.mlp_in_bias, n.mlp_out_weight, n.mlp_out_bias};
  for (const auto* list : {&n.qkv_weight, &n.qkv_bias, &n.mlp_in_weight}) v.insert(v.end(), list->begin(), list->end());
  v.erase(std::remove(v.begin(), v.end(), std::string()), v.end());
  return v;
}

}  // namespace

TransformerLM::TransformerLM(std::vector<ParamSpec> table, ArchSpec spec, Device device, Precision precision,
                             ParamShard shard)
    : params_(std::move(table), device, master_dtype(precision), shard), spec_(std::move(spec)) {
  if (precision != Precision::F32) {
    if (device == Device::CPU)
      fail(precision_name(precision), " precision needs the CUDA backend (the CPU backend computes in fp32)");
    // bf16-mixed: fp32 masters plus a bf16 compute copy; bf16: the masters are bf16 already.
    if (precision == Precision::Bf16Mixed) params_.enable_compute_copy();
    ctx_.act_dtype = DType::BF16;
  }
  ctx_.params = &params_;
  const ArchSpec& s = spec_;
  std::vector<float> f = s.rope_inv_freq;
  if (f.empty()) f.assign(size_t(s.head_dim / 2), 0.0f);  // angle 0: rotary is the identity
  inv_freq_ = Tensor::from_f32({int64_t(f.size())}, f).to(device);

  const ParamStore& p = params_;
  // layer >= 0: projection proj of that layer (quantized as the layer is assigned)
  auto linear = [&](const std::vector<std::string>& w, const std::string& b, int layer, int proj) {
    return Linear(&ctx_, ParamRef(p, w), ParamRef(p, b), layer, proj);
  };
  auto norm = [&](NormKind kind, const std::string& w, const std::string& b) {
    return Norm(&ctx_, kind, ParamRef(p, w), ParamRef(p, b), s.norm_eps);
  };
  const bool embed_norm = !s.embed_norm_weight.empty();
  embed_ = TokenEmbedding(&ctx_, ParamRef(p, s.embed_weight), s.esm_rescale, s.mask_token_id,
                          ParamRef(p, s.position_embed_weight),
                          embed_norm ? norm(NormKind::LayerNorm, s.embed_norm_weight, s.embed_norm_bias) : Norm(),
                          embed_norm);
  std::vector<TransformerLayer> layers;
  for (int l = 0; l < int(s.layers); ++l) {
    const LayerParamNames n = s.layer_names(l);
    const std::vector<std::string> qkv_bias = n.qkv_bias;
    SelfAttention attn(&ctx_, attention_spec(),
                       Linear(&ctx_, ParamRef(p, n.qkv_weight), ParamRef(p, qkv_bias), l, 0),
                       linear({n.out_weight}, n.out_bias, l, 1), &inv_freq_);
    Mlp mlp(&ctx_, s.mlp, linear(n.mlp_in_weight, n.mlp_in_bias, l, 2), linear({n.mlp_out_weight}, n.mlp_out_bias, l, 3));
    layers.emplace_back(&ctx_, norm(s.norm, n.norm1_weight, n.norm1_bias), std::move(attn),
                        norm(s.norm, n.norm2_weight, n.norm2_bias), std::move(mlp), s.pre_norm);
    int64_t lo = p.numel(), hi = 0;
    for (const std::string& name : all_names(n)) {
      const size_t i = p.index(name);
      lo = std::min(lo, p.offset(i));
      hi = std::max(hi, p.offset(i) + shape_numel(p.spec(i).shape));
    }
    layer_ranges_.push_back({lo, hi});
  }
  stack_ = TransformerStack(std::move(layers));
  if (!s.final_norm_weight.empty()) final_norm_ = norm(s.norm, s.final_norm_weight, s.final_norm_bias);
  const bool transform = !s.head_dense_weight.empty();
  head_ = LmHead(&ctx_, transform ? linear({s.head_dense_weight}, s.head_dense_bias, -1, 0) : Linear(),
                 transform ? norm(NormKind::LayerNorm, s.head_norm_weight, s.head_norm_bias) : Norm(),
                 linear({s.decoder_weight}, s.decoder_bias, -1, 0), transform);
}

ModelDims TransformerLM::dims() const {
  return {spec_.hidden, spec_.layers, spec_.vocab, spec_.ffn, spec_.heads, spec_.kv_heads, spec_.parameters, spec_.max_positions};
}

void TransformerLM::set_fp8(std::optional<ops::Fp8Recipe> recipe) {
  std::vector<ops::LayerQuant> layers;
  if (recipe) {
    ops::LayerQuant q;
    q.format = ops::LayerFormat::Fp8;
    q.fwd = recipe->fwd;
    q.bwd = recipe->bwd;
    layers.assign(size_t(spec_.layers), q);
  }
  set_layer_quant(std::move(layers));
}

void TransformerLM::set_layer_quant(std::vector<ops::LayerQuant> layers) {
  if (!layers.empty() && int64_t(layers.size()) != spec_.layers)
    fail("set_layer_quant: ", layers.size(), " layer settings for a model of ", spec_.layers, " layers");
  // DelayedScaling state: 3 tensors per projection, 4 projections per layer (rows of layers
  // in other formats stay unused); the history length is the recipe's (one per model).
  int64_t history = 0;
  for (const ops::LayerQuant& q : layers)
    if (q.format == ops::LayerFormat::Fp8 && q.scaling == ops::Fp8Scaling::Delayed) {
      if (history && history != q.delayed.amax_history_len) fail("set_layer_quant: one amax_history_len per model");
      history = q.delayed.amax_history_len;
    }
  ctx_.layer_quant = std::move(layers);
  ctx_.delayed_history = ctx_.delayed_scale_amax = Tensor();
  if (history) {
    const int64_t rows = spec_.layers * 4 * 3;
    ctx_.delayed_history = Tensor::zeros({rows, history}, DType::F32, device());
    std::vector<float> init(size_t(rows), 1.0f);
    for (int64_t l = 0; l < spec_.layers; ++l)
      for (int64_t r = 0; r < 12; ++r) {  // scale 1 to start, as Transformer Engine's: scale_amax = fp8_max
        const ops::LayerQuant& q = ctx_.layer_quant[size_t(l)];
        init[size_t(l * 12 + r)] = ops::fp8_max(r % 3 == 2 ? q.bwd : q.fwd);
      }
    ctx_.delayed_scale_amax = Tensor::from_f32({rows}, init).to(device());
  }
  // FP8 attention: a state per layer (zeros: nothing measured yet, so each layer's first
  // backward calibrates). On the GPU cuDNN's FP8 attention backward takes head dim 128 only.
  ctx_.fp8_attention_state = Tensor();
  ctx_.fp8_attention_calibrated.clear();
  bool dpa = false;
  for (const ops::LayerQuant& q : ctx_.layer_quant) dpa |= q.format == ops::LayerFormat::Fp8 && q.fp8_dpa;
  if (dpa) {
    if (device() == Device::CUDA && spec_.head_dim != 128)
      fail("fp8_dpa (FP8 attention) on the GPU needs head dim 128 (cuDNN's FP8 attention backward on Hopper "
           "takes no other); this model's is ", spec_.head_dim);
    ctx_.fp8_attention_state = Tensor::zeros({spec_.layers, ops::kFp8AttentionSlots}, DType::F32, device());
    ctx_.fp8_attention_calibrated.assign(size_t(spec_.layers), 0);
  }
  ++ctx_.fp8_epoch;  // weight codes made under another recipe are stale
}

void TransformerLM::quant_step_end() {
  if (!ctx_.delayed_history.defined()) return;
  for (const ops::LayerQuant& q : ctx_.layer_quant)
    if (q.format == ops::LayerFormat::Fp8 && q.scaling == ops::Fp8Scaling::Delayed) {
      ops::fp8_delayed_update(ctx_.delayed_history, ctx_.delayed_scale_amax, q.delayed.margin,
                              q.delayed.amax_compute_max);
      return;  // one update covers every row (one margin and algorithm per model)
    }
}

std::vector<std::pair<std::string, Tensor>> TransformerLM::quant_state() const {
  std::vector<std::pair<std::string, Tensor>> s;
  if (ctx_.delayed_history.defined())
    s = {{"fp8.delayed.amax_history", ctx_.delayed_history}, {"fp8.delayed.scale_amax", ctx_.delayed_scale_amax}};
  if (ctx_.fp8_attention_state.defined()) s.push_back({"fp8.attention.state", ctx_.fp8_attention_state});
  return s;
}

void TransformerLM::quant_state_loaded() {
  if (!ctx_.fp8_attention_state.defined()) return;
  // A layer whose attention has measured its gradients' amaxes needs no calibration (one host
  // copy, at load time only).
  const Tensor st = ctx_.fp8_attention_state.to(Device::CPU);
  for (int64_t l = 0; l < spec_.layers; ++l) {
    const float* row = st.f32() + l * ops::kFp8AttentionSlots;
    bool measured = false;
    for (int64_t i = ops::kFa8AmaxDq; i <= ops::kFa8AmaxDp; ++i) measured = measured || row[i] != 0.0f;
    ctx_.fp8_attention_calibrated[size_t(l)] = measured;
  }
}

std::pair<int64_t, int64_t> TransformerLM::layer_param_range(int layer) const {
  return layer_ranges_.at(size_t(layer));
}

void TransformerLM::check_batch(const Batch& b) const {
  if (b.input_ids.device() != device())
    fail("batch is on ", device_name(b.input_ids.device()), ", model on ", device_name(device()));
}

Tensor TransformerLM::final_hidden(const Batch& b, KvCache* cache) {
  check_batch(b);
  settle_weights();
  if (layer_hook_) layer_hook_(LayerEvent::BeforeForward, -1);
  TokenEmbedding::Acts e;
  Tensor x = stack_.forward(b, embed_.forward(b, e), cache, layer_hook_);
  if (!final_norm_.defined()) return x;
  Tensor out;
  NormStats st;
  final_norm_.forward(out, st, x);
  return out;
}

Tensor TransformerLM::hidden_states(const Batch& b) { return final_hidden(b, nullptr); }

void TransformerLM::prepare_forward(const std::vector<BatchShape>& batches) {
  const AttentionSpec a = attention_spec();
  std::vector<ops::AttentionBatch> shapes;
  for (const BatchShape& b : batches)
    shapes.push_back({b.sequences, b.rows, b.max_seqlen, b.uniform,
                      reads_packed_qkv(a, device(), act_dtype(), b.uniform, /*decoding=*/false)});
  ops::attention_prepare_forward(device(), act_dtype(), shapes, ops::QkvHeads{a.heads, a.kv_heads, a.head_dim},
                                 a.causal);
}

std::vector<Tensor> TransformerLM::layer_hidden_states(const Batch& b, const std::vector<int>& layers) {
  check_batch(b);
  settle_weights();
  const int L = int(spec_.layers);
  int deepest = 0;
  for (int l : layers) {
    if (l < 0 || l > L) fail("layer ", l, " does not exist: the model has layers 0 (embeddings) to ", L);
    deepest = std::max(deepest, l);
  }
  std::vector<Tensor> by_layer(size_t(L + 1));
  const auto wanted = [&](int l) { return std::find(layers.begin(), layers.end(), l) != layers.end(); };
  TokenEmbedding::Acts e;
  Tensor x = embed_.forward(b, e);
  if (wanted(0)) by_layer[0] = x;
  // Layer l's output is x_out of stack layer l-1; the last one is normalised below.
  x = stack_.forward_layers(b, x, deepest, [&](int l, const Tensor& out) {
    if (l + 1 < L && wanted(l + 1)) by_layer[size_t(l + 1)] = out;
  });
  if (deepest == L && L > 0) {
    Tensor normed;
    if (final_norm_.defined()) {
      NormStats st;
      final_norm_.forward(normed, st, x);
    } else {
      normed = x;
    }
    by_layer[size_t(L)] = normed;
  }
  std::vector<Tensor> out;
  for (int l : layers) out.push_back(by_layer[size_t(l)]);
  return out;
}

Tensor TransformerLM::logits(const Batch& b) {
  HeadActs h;
  return head_.forward(final_hidden(b, nullptr), h);
}

Tensor TransformerLM::token_losses(const Batch& b) {
  Tensor lg = logits(b);
  Tensor token_loss = ctx_.f32({b.num_rows()}), none;
  ops::cross_entropy_forward_backward(token_loss, none, lg, b.labels, 0.0f);
  return token_loss;
}

LossSums TransformerLM::evaluate(const Batch& b, bool count_correct) {
  Tensor lg = logits(b);
  Tensor token_loss = ctx_.f32({b.num_rows()}), none;
  ops::cross_entropy_forward_backward(token_loss, none, lg, b.labels, 0.0f);
  return sum_losses(token_loss, lg, b.labels, count_correct);
}

namespace {
// The layers' weight gradients on the side stream for one backward pass (ops.wgrad_stream);
// joined back into the compute stream when the pass ends, also when it ends in an error.
struct GradsBeside {
  BlockContext& ctx;
  explicit GradsBeside(BlockContext& c) : ctx(c) {
    ctx.grads_beside = ops::op_options().wgrad_stream && ctx.device() == Device::CUDA;
  }
  ~GradsBeside() {
    ctx.grads_beside = false;
    try {
      side_stream::join();
    } catch (...) {  // (a CUDA error is sticky: the next check reports it)
    }
  }
};
}  // namespace

void TransformerLM::forward_backward(const Batch& b, float grad_scale, Tensor& loss_acc) {
  check_batch(b);
  GradsBeside beside(ctx_);
  // Forward, keeping what backward reads.
  if (layer_hook_) layer_hook_(LayerEvent::BeforeForward, -1);
  if (update_ && update_->due(-1)) update_->apply(-1);  // (the layers' parts: in forward_train)
  TokenEmbedding::Acts embed_acts;
  std::vector<LayerActs> acts;
  Tensor x_last;
  {
    NvtxRange range("forward");  // (each layer has a range of its own inside)
    Tensor x0;
    {
      NvtxRange e("embedding forward");
      x0 = embed_.forward(b, embed_acts);
    }
    x_last = stack_.forward_train(b, x0, acts, layer_hook_, update_);
  }
  settle_weights();  // (nothing left after forward_train; backward must not add to gradients owed an update)
  Tensor h = x_last, lg, dx;
  NormStats final_st;
  HeadActs head_acts;
  {
    NvtxRange range("head and loss");  // final norm, head, loss and their backward
    if (final_norm_.defined()) final_norm_.forward(h, final_st, x_last);
    lg = head_.forward(h, head_acts);
    Tensor token_loss = ctx_.f32({b.num_rows()});
    ops::cross_entropy_forward_backward(token_loss, lg, lg, b.labels, grad_scale);  // dlogits in place
    ops::sum_accumulate(loss_acc, token_loss);  // ignored rows hold 0

    // Backward: head, final norm, layers (in reverse, freeing as it goes), embedding.
    Tensor dh;
    head_.backward(dh, lg, h, head_acts);
    lg = Tensor();
    dx = dh;
    if (final_norm_.defined()) {
      dx = ctx_.act(x_last.shape());
      final_norm_.backward(dx, dh, x_last, final_st);
    }
    dh = h = Tensor();
  }
  {
    NvtxRange range("backward");
    stack_.backward(b, acts, dx, layer_hook_);
    NvtxRange e("embedding backward");
    embed_.backward(dx, b, embed_acts);
  }
  side_stream::join();  // every weight gradient is final from here on
  if (layer_hook_) layer_hook_(LayerEvent::GradsReady, -1);
}

KvCache TransformerLM::new_cache(int64_t capacity) const {
  if (!spec_.causal) fail("incremental decoding needs a causal model");
  if (capacity <= 0) fail("KV cache capacity must be positive, got ", capacity);
  KvCache c;
  c.capacity = capacity;
  for (int l = 0; l < int(spec_.layers); ++l) {
    c.k.push_back(Tensor::zeros({capacity, spec_.kv_heads, spec_.head_dim}, ctx_.act_dtype, device()));
    c.v.push_back(Tensor::zeros({capacity, spec_.kv_heads, spec_.head_dim}, ctx_.act_dtype, device()));
  }
  return c;
}

Tensor TransformerLM::forward_cached(const std::vector<int32_t>& ids, KvCache& cache) {
  const int64_t n = int64_t(ids.size());
  if (n == 0) fail("forward_cached: no tokens");
  if (cache.length + n > cache.capacity)
    fail("KV cache full: ", cache.length, " + ", n, " tokens exceed its capacity ", cache.capacity);
  if (int64_t(cache.k.size()) != spec_.layers) fail("KV cache was not made by this model");
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
  HeadActs h;
  Tensor lg = head_.forward(final_hidden(b, &cache), h);
  cache.length += n;
  return lg;
}

}  // namespace biofm
