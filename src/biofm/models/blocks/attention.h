// SelfAttention: one fused q|k|v projection, rotary positions applied while splitting the
// packed rows (no rotation when the block has no rotary frequencies: angle 0 everywhere),
// scaled dot-product attention within each sequence (bidirectional or causal; grouped-query
// heads when kv_heads < heads), and the output projection with the residual added in its GEMM.
#pragma once
#include "biofm/data/batch.h"
#include "biofm/ops/attention/op.h"
#include "biofm/models/blocks/linear.h"

namespace biofm {

struct AttentionSpec {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = false;
};

// Whether SelfAttention::forward reads q, k, v in place from the fused projection's rows
// (attention_forward_packed) for a batch on `device` in `dtype`: not when decoding (k and v go
// into the cache), not for uniform batches (full windows: cuDNN's dense graphs, which measured
// 0.8% faster for Llama 1B on H100 on separate tensors, while ragged ESM-2 batches gain 1-1.7%
// in place: docs/PERFORMANCE.md, session 14), and on the GPU only where cuDNN can read them in
// place (bf16, head dim a multiple of 8; the other CUDA paths would unpack anyway, and the
// unpacking rope kernel does that in the same pass). The CPU takes it too: its copies are cheap.
bool reads_packed_qkv(const AttentionSpec& spec, Device device, DType dtype, bool uniform, bool decoding);

// Whether a batch on `device` whose layer asks for FP8 attention (fp8_dpa) gets it: on the GPU
// cuDNN's FP8 graphs take full windows only, so a batch with a shorter window (a record's last)
// runs its attention in bf16, said once per process in a note (core/notes.h).
bool fp8_attention_takes(const Batch& b, Device device);

// Per-layer keys/values for incremental decoding: k[l], v[l] are [capacity, kv_heads, head_dim]
// (rotary already applied to k) on the model's device; rows [0, length) are filled.
struct KvCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
  int64_t capacity = 0;
};

// What backward needs from forward (FP8: the inputs' transposed codes when kept).
struct AttentionActs {
  Tensor qkv;      // the projection's output, q and k rotated in place (what backward reads;
                   // context parallelism: the group's rows)
  Tensor q, k, v;  // instead of qkv: decoding (k, v also go to the cache), or ops.attention_packed_qkv off
  Tensor attn, lse;
  ops::Fp8SavedInput fp8_qkv, fp8_o;
  // FP8 attention (LayerQuant::fp8_dpa): the codes backward reads instead of q, k, v, lse.
  ops::Fp8AttentionSaved fp8_attn;
  int layer = -1;
};

class SelfAttention {
 public:
  SelfAttention() = default;
  // inv_freq: F32 [head_dim/2] on the device (all zeros: no rotary), shared by the layers.
  SelfAttention(const BlockContext* ctx, const AttentionSpec& spec, Linear qkv, Linear out, const Tensor* inv_freq)
      : ctx_(ctx), spec_(spec), qkv_(std::move(qkv)), out_(std::move(out)), inv_freq_(inv_freq) {}

  const Linear& qkv() const { return qkv_; }
  const Linear& out() const { return out_; }
  // out = residual + W_o·Attn(rope(W_q·xn), rope(W_k·xn), W_v·xn) (+ biases). keep_fp8: keep the
  // FP8 input codes for backward; xn_amax: max |xn| from the norm. cache (decoding): this
  // layer's keys/values are appended at cache.length and the new rows attend to the cache.
  // xn_codes: xn exists only as the FP8 codes its norm made for W_qkv (pass an undefined xn;
  // qkv().takes_codes() only).
  void forward(Tensor& out, const Tensor& xn, const Tensor& residual, const Batch& b, AttentionActs& a,
               bool keep_fp8, const Tensor& xn_amax, KvCache* cache, int layer,
               const ops::Fp8Codes* xn_codes = nullptr) const;
  // dxn = the gradient w.r.t. xn (overwritten) given dout, the gradient w.r.t. out (whose
  // residual part the caller adds); parameter gradients accumulate.
  // dout_amax: max |dout| from its producer (FP8: the output projection's gradient
  // quantization reuses it), or undefined.
  void backward(Tensor& dxn, const Tensor& dout, const Tensor& xn, const Batch& b, AttentionActs& a,
                const Tensor& dout_amax = Tensor()) const;

 private:
  // Whether layer `layer` runs its attention in FP8 (LayerQuant::fp8_dpa; never when decoding).
  bool fp8_attention(int layer) const {
    const ops::LayerQuant* q = ctx_->quant_of(layer);
    return q && q->format == ops::LayerFormat::Fp8 && q->fp8_dpa && ctx_->fp8_attention_state.defined();
  }
  // Context parallelism: attention over the group's rows (b.cp), this rank's rows out.
  void forward_context_parallel(const Batch& b, AttentionActs& a, const Tensor& packed) const;
  void backward_context_parallel(Tensor& dpacked, const Batch& b, AttentionActs& a, const Tensor& dattn) const;

  const BlockContext* ctx_ = nullptr;
  AttentionSpec spec_;
  Linear qkv_, out_;
  const Tensor* inv_freq_ = nullptr;
};

}  // namespace biofm
