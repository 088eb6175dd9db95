#include "biofm/models/blocks/attention.h"

#include <atomic>
#include <cmath>
#include <string>

#include "biofm/core/error.h"
#include "biofm/core/notes.h"
#include "biofm/core/profiling.h"
#include "biofm/dist/comm.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/embedding/op.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/options.h"
#include "biofm/ops/rope/op.h"

namespace biofm {

bool fp8_attention_takes(const Batch& b, Device device) {
  if (device != Device::CUDA || b.uniform()) return true;
  static std::atomic<bool> noted{false};
  if (!noted.exchange(true))
    note("fp8_dpa: batches that are not all full windows (here " + std::to_string(b.max_seqlen) +
         " tokens at most) run their attention in bf16; cuDNN's FP8 attention takes full windows only");
  return false;
}

bool reads_packed_qkv(const AttentionSpec& spec, Device device, DType dtype, bool uniform, bool decoding) {
  const bool cudnn_like = device != Device::CUDA || (dtype == DType::BF16 && spec.head_dim % 8 == 0);
  return !decoding && ops::op_options().attention_packed_qkv && !uniform && cudnn_like;
}

void SelfAttention::forward(Tensor& out, const Tensor& xn, const Tensor& residual, const Batch& b, AttentionActs& a,
                            bool keep_fp8, const Tensor& xn_amax, KvCache* cache, int layer,
                            const ops::Fp8Codes* xn_codes) const {
  const int64_t T = xn_codes ? xn_codes->codes.size(0) : xn.size(0), nh = spec_.heads, nkv = spec_.kv_heads,
                hd = spec_.head_dim;
  Tensor packed = ctx_->act({T, (nh + 2 * nkv) * hd});  // one GEMM for q | k | v
  qkv_.forward(packed, xn, Tensor(), keep_fp8 ? &a.fp8_qkv : nullptr, xn_amax, xn_codes);
  a.attn = ctx_->act({T, nh, hd});
  const float scale = 1.0f / std::sqrt(float(hd));
  const ops::AttentionShape shape{scale, spec_.causal, b.max_seqlen, b.uniform()};
  // FP8 attention where the layer asks for it; on the GPU cuDNN's FP8 graphs take full windows
  // only, so a batch with a shorter window (a record's last) runs its attention in bf16 (noted).
  const bool fp8_attn = !cache && fp8_attention(layer) && fp8_attention_takes(b, packed.device());
  if (b.cp) {
    if (cache) fail("context parallelism does not decode");
    if (fp8_attention(layer)) fail("fp8_dpa (FP8 attention) does not take context parallelism");
    ops::rope_qk_packed(packed, b.positions, *inv_freq_, nh, nkv, /*inverse=*/false);
    forward_context_parallel(b, a, packed);
  } else if (!fp8_attn &&
             reads_packed_qkv(spec_, packed.device(), packed.dtype(), b.uniform(), cache != nullptr)) {
    // Training, scoring, embedding: rope in place, attention reads q, k, v from the packed rows.
    ops::rope_qk_packed(packed, b.positions, *inv_freq_, nh, nkv, /*inverse=*/false);
    a.qkv = packed;
    a.lse = ctx_->f32({T, nh});
    NvtxRange r("sdpa forward");
    ops::attention_forward_packed(a.attn, a.lse, a.qkv, ops::QkvHeads{nh, nkv, hd}, b.cu_seqlens, b.seq_lens, shape);
  } else {
    // Separate q, k, v: decoding (k and v go into the cache), or ops.attention_packed_qkv off.
    a.q = ctx_->act({T, nh, hd});
    a.k = ctx_->act({T, nkv, hd});
    a.v = ctx_->act({T, nkv, hd});
    ops::rope_unpack_qkv(a.q, a.k, a.v, packed, b.positions, *inv_freq_);
    packed = Tensor();
    if (cache) {
      const int64_t p0 = cache->length;
      Tensor kdst = cache->k[size_t(layer)].narrow0(p0, T), vdst = cache->v[size_t(layer)].narrow0(p0, T);
      kdst.copy_from(a.k);
      vdst.copy_from(a.v);
    }
    if (cache && cache->length > 0) {
      // The new rows (positions length .. length+T-1) against the cache rows [0, length+T),
      // which now include their own keys/values.
      ops::attention_decode(a.attn, a.q, cache->k[size_t(layer)], cache->v[size_t(layer)], cache->length + T,
                            cache->length, scale);
    } else if (fp8_attn) {
      // FP8 attention: backward reads the codes kept here, so q, k, v go now.
      NvtxRange r("sdpa forward fp8");
      a.layer = layer;
      Tensor state = ctx_->fp8_attention_state.narrow0(layer, 1).view({ops::kFp8AttentionSlots});
      ops::attention_forward_fp8(a.attn, a.fp8_attn, state, a.q, a.k, a.v, b.cu_seqlens, b.seq_lens, shape);
      a.q = a.k = a.v = Tensor();
    } else {
      a.lse = ctx_->f32({T, nh});
      NvtxRange r("sdpa forward");
      ops::attention_forward(a.attn, a.lse, a.q, a.k, a.v, b.cu_seqlens, b.seq_lens, shape);
    }
  }
  out = ctx_->act({T, residual.size(1)});
  out_.forward(out, a.attn.view({T, nh * hd}), residual, keep_fp8 ? &a.fp8_o : nullptr);
}

void SelfAttention::backward(Tensor& dxn, const Tensor& dout, const Tensor& xn, const Batch& b, AttentionActs& a,
                             const Tensor& dout_amax) const {
  const int64_t T = dout.size(0), nh = spec_.heads, nkv = spec_.kv_heads, hd = spec_.head_dim;
  Tensor dattn = ctx_->act({T, nh * hd});
  out_.backward(dattn, dout, a.attn.view({T, nh * hd}), &a.fp8_o, dout_amax);
  const ops::AttentionShape shape{1.0f / std::sqrt(float(hd)), spec_.causal, b.max_seqlen, b.uniform()};
  Tensor dpacked = ctx_->act({T, (nh + 2 * nkv) * hd}), dpacked_amax;
  if (a.qkv.defined()) {  // (also context parallelism's: the group's rows)
    if (b.cp) {
      backward_context_parallel(dpacked, b, a, dattn);
    } else {
      NvtxRange r("sdpa backward");
      ops::attention_backward_packed(dpacked, dattn.view({T, nh, hd}), a.qkv, ops::QkvHeads{nh, nkv, hd}, a.attn,
                                     a.lse, b.cu_seqlens, b.seq_lens, shape);
    }
    dattn = Tensor();
    // FP8: the inverse rotation also gives max |dq|dk|dv| for the gradient's quantization.
    if (qkv_.fp8()) dpacked_amax = ctx_->f32({1});
    ops::rope_qk_packed(dpacked, b.positions, *inv_freq_, nh, nkv, /*inverse=*/true, dpacked_amax);
  } else {
    Tensor dq = ctx_->act({T, nh, hd}), dk = ctx_->act({T, nkv, hd}), dv = ctx_->act({T, nkv, hd});
    if (a.fp8_attn.q.defined()) {
      NvtxRange r("sdpa backward fp8");
      Tensor state = ctx_->fp8_attention_state.narrow0(a.layer, 1).view({ops::kFp8AttentionSlots});
      char& calibrated = ctx_->fp8_attention_calibrated.at(size_t(a.layer));
      ops::attention_backward_fp8(dq, dk, dv, state, dattn.view({T, nh, hd}), a.fp8_attn, b.cu_seqlens, b.seq_lens,
                                  shape, /*calibrate=*/!calibrated);
      calibrated = 1;
      a.fp8_attn = ops::Fp8AttentionSaved();
    } else {
      NvtxRange r("sdpa backward");
      ops::attention_backward(dq, dk, dv, dattn.view({T, nh, hd}), a.q, a.k, a.v, a.attn, a.lse, b.cu_seqlens,
                              b.seq_lens, shape);
    }
    dattn = Tensor();
    ops::rope_pack_qkv_grad(dpacked, dq, dk, dv, b.positions, *inv_freq_);
  }
  dxn = ctx_->act({T, qkv_.weight().size(1)});  // (xn may have been dropped: Fp8SavedInput::replaces_x)
  qkv_.backward(dxn, dpacked, xn, &a.fp8_qkv, dpacked_amax);
}

// ---- Context parallelism ----
// Each rank of the group holds some rows of every sequence (data/context_parallel.h). Forward
// gathers the group's q|k|v rows (every rank's keys and values; the queries ride along unread)
// and computes its own rows' attention against them; backward computes its rows' dq and its
// contributions to every row's dk, dv, which are summed at the rows' owners. (The GPU form will
// gather only keys and values; this is the CPU reference.)

namespace {

Communicator& group_of(const BlockContext& ctx) {
  if (!ctx.cp_group) fail("a context-parallel batch reached a model without its context-parallel group");
  return *ctx.cp_group;
}

// The group's rows of `local` [T, W] in the group's layout [global_rows, W]: every rank's rows
// gathered (rank k's at [k·T, (k+1)·T)), then put in sequence order.
Tensor gather_group_rows(const BlockContext& ctx, const Tensor& local, const ContextParallelShard& cp) {
  Communicator& group = group_of(ctx);
  const int64_t T = local.size(0), W = local.numel() / std::max<int64_t>(T, 1);
  const Tensor rows = local.view({T, W});
  Tensor gathered = Tensor::empty({int64_t(cp.cp_size) * T, W}, local.dtype(), local.device());
  group.group_begin();
  for (int k = 0; k < cp.cp_size; ++k) {
    Tensor dst = gathered.narrow0(int64_t(k) * T, T);
    group.broadcast_from(rows, dst, k);
  }
  group.group_end();
  group.join();
  Tensor global = Tensor::empty({cp.global_rows, W}, local.dtype(), local.device());
  ops::embedding_forward(global, cp.gathered_to_global, gathered);
  return global;
}

// The reverse: of `global` [global_rows, W] (one rank's contributions to every row), the sum
// over the group's ranks of this rank's rows [T, W].
Tensor reduce_to_owners(const BlockContext& ctx, const Tensor& global, const ContextParallelShard& cp, int64_t T) {
  Communicator& group = group_of(ctx);
  const int64_t W = global.size(1);
  Tensor by_rank = Tensor::zeros({int64_t(cp.cp_size) * T, W}, global.dtype(), global.device());
  ops::embedding_backward(by_rank, global, cp.gathered_to_global);  // (a permutation: each slot once)
  Tensor mine = Tensor::empty({T, W}, global.dtype(), global.device());
  group.group_begin();
  for (int k = 0; k < cp.cp_size; ++k) group.reduce_sum_to(by_rank.narrow0(int64_t(k) * T, T), mine, k);
  group.group_end();
  group.join();
  return mine;
}

// The attention shape of the group's layout.
ops::AttentionShape group_shape(const AttentionSpec& spec, const ContextParallelShard& cp) {
  return {1.0f / std::sqrt(float(spec.head_dim)), spec.causal, cp.global_max_seqlen, cp.global_uniform};
}

}  // namespace

void SelfAttention::forward_context_parallel(const Batch& b, AttentionActs& a, const Tensor& packed) const {
  const ContextParallelShard& cp = *b.cp;
  const int64_t T = packed.size(0), nh = spec_.heads, nkv = spec_.kv_heads, hd = spec_.head_dim;
  a.qkv = gather_group_rows(*ctx_, packed, cp);
  a.lse = ctx_->f32({T, nh});
  NvtxRange r("sdpa forward");
  ops::attention_forward_packed_rows(a.attn, a.lse, a.qkv, ops::QkvHeads{nh, nkv, hd}, cp.local_to_global,
                                     cp.global_cu_seqlens, cp.global_seq_lens, group_shape(spec_, cp));
}

void SelfAttention::backward_context_parallel(Tensor& dpacked, const Batch& b, AttentionActs& a,
                                              const Tensor& dattn) const {
  const ContextParallelShard& cp = *b.cp;
  const int64_t T = dattn.size(0), G = cp.global_rows, nh = spec_.heads, nkv = spec_.kv_heads, hd = spec_.head_dim;
  Tensor dkv = ctx_->act({G, (nh + 2 * nkv) * hd});
  {
    NvtxRange r("sdpa backward");
    ops::attention_backward_packed_rows(dpacked, dkv, dattn.view({T, nh, hd}), a.qkv, ops::QkvHeads{nh, nkv, hd},
                                        a.attn, a.lse, cp.local_to_global, cp.global_cu_seqlens,
                                        cp.global_seq_lens, group_shape(spec_, cp));
  }
  // dpacked holds this rank's dq (k, v parts zero); add every rank's dk, dv of its rows.
  const Tensor mine = reduce_to_owners(*ctx_, dkv, cp, T);
  ops::add_inplace(dpacked, mine);
}

}  // namespace biofm
