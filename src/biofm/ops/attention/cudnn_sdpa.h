// Private to the CUDA attention op (cuda.cu, cudnn_sdpa_cuda.cpp) and its tests.
//
// Two paths compute attention on the GPU:
//   * cuDNN's fused SDPA through the cuDNN frontend graph API (cudnn_sdpa_cuda.cpp): BF16, head
//     dim a multiple of 8 up to 128 (ESM-2's 16/24/32/64/128, Llama's 64/128), packed THD via
//     ragged offsets, Hopper or newer, cuDNN >= 9.6;
//   * plain CUDA kernels (cuda.cu): any head dim up to 128, F32 or BF16, used for everything
//     cuDNN does not take and whenever a cuDNN graph fails to build.
// The public ops pick the path with attention_path_for(); the option ops.attention
// (OpOptions::attention: fallback|cudnn|auto) overrides the choice (cudnn: a shape cuDNN cannot
// take is an error rather than a fallback), and ops.attention_verbose prints, once per shape,
// which path ran.
// This header includes no CUDA or cuDNN header, so tests can use it from plain C++.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "biofm/ops/attention/op.h"
#include "biofm/ops/options.h"

namespace biofm::ops::cuda::attention_detail {

using AttentionPath = AttentionBackend;

// Static capability check for the cuDNN path (no graph is built): BF16, head dim a multiple of
// 8 in [8, 128], Hq a multiple of Hkv, a GPU of compute capability >= 9.0 (not 12.x) and
// cuDNN >= 9.6 at run time.
// When it returns false and `why` is given, *why says which condition failed.
bool cudnn_sdpa_supported(DType dtype, int64_t head_dim, int64_t hq, int64_t hkv,
                          std::string* why = nullptr);

// The path a call with `requested` (Auto: decided by shape) would start on. A cuDNN graph that
// fails to build can still send an Auto call to the fallback afterwards.
AttentionPath attention_path_for(AttentionPath requested, DType dtype, int64_t head_dim,
                                 int64_t hq, int64_t hkv);

// The public ops with an explicit path (tests and benchmarks). The public ops call these with
// op_options().attention.
void attention_forward_with(AttentionPath path, Tensor& out, Tensor& lse, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                            const Tensor& seq_lens, const AttentionShape& a);
void attention_backward_with(AttentionPath path, Tensor& dq, Tensor& dk, Tensor& dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& cu_seqlens, const Tensor& seq_lens,
                             const AttentionShape& a);

// The packed ops (attention_*_packed) with an explicit path.
void attention_forward_packed_with(AttentionPath path, Tensor& out, Tensor& lse, const Tensor& qkv,
                                   const QkvHeads& heads, const Tensor& cu_seqlens, const Tensor& seq_lens,
                                   const AttentionShape& a);
void attention_backward_packed_with(AttentionPath path, Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                    const QkvHeads& heads, const Tensor& out, const Tensor& lse,
                                    const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a);

// ---- between cuda.cu and cudnn_sdpa_cuda.cpp ----

// Everything the cuDNN path needs for one call. Pointers are device pointers; B = number of
// sequences (seq_lens entries), N = rows of q. max_seqlen must bound every seq_lens entry.
struct SdpaCall {
  int64_t N = 0, B = 0, Hq = 0, Hkv = 0, D = 0;
  int64_t max_seqlen = 0;
  float scale = 1.0f;
  bool causal = false;
  bool uniform = false;  // every sequence exactly max_seqlen rows, back to back (N == B·max_seqlen)
  // Elements from one token's row of q to the next, the same for k and v (and dq, dk, dv): 0 for
  // separate tensors (Hq·D, Hkv·D); (Hq + 2·Hkv)·D when q, k, v are the three parts of one packed
  // projection output (attention_*_packed), read and written in place through strides.
  int64_t qkv_row = 0;
  const int32_t* cu_seqlens = nullptr;  // [B+1]
  const int32_t* seq_lens = nullptr;    // [B]
  // forward: q, k, v in; out, lse out. backward: also dout, out, lse in; dq, dk, dv out.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;        // forward output / backward input (const there)
  float* lse = nullptr;       // forward output / backward input (const there)
  const void* dout = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  // FP8 (attention_*_fp8; dense graphs of uniform batches only): q, k, v, out, dout, dq, dk, dv
  // are E4M3 codes and fp8_state the op's state (F32 [kFp8AttentionSlots], op.h): the graph
  // reads its scales there and writes its amaxes there. lse is then cuDNN's statistics in packed
  // [B, Hq, S] order (Fp8AttentionSaved::stats), read and written as they are.
  float* fp8_state = nullptr;
};

// Run cuDNN SDPA forward/backward (BF16) on cuda_ctx::stream(). Return false, with *why set,
// when no graph could be built or run for this shape; nothing is then promised about the
// outputs and the caller runs the fallback. Padding rows are NOT zeroed here (cuda.cu does it).
bool cudnn_sdpa_forward(const SdpaCall& c, std::string* why);
bool cudnn_sdpa_backward(const SdpaCall& c, std::string* why);
// Builds the graphs these calls will run (only their shape fields are read: N, B, Hq, Hkv, D,
// max_seqlen, causal, uniform, qkv_row), each on a thread of its own with a cuDNN handle of its
// own that then executes it; returns at once. A call that needs a graph still being built waits
// for it instead of building it again (attention_prepare_forward).
void cudnn_sdpa_prebuild(const std::vector<SdpaCall>& calls, bool backward);

// Number of cuDNN graphs built so far (forward and backward, failed builds included); lets
// tests check that graph keys are bucketed.
size_t cudnn_sdpa_graph_count();
// Calls (forward or backward) that ran a dense graph (SdpaCall.uniform, ops.sdpa_dense).
size_t cudnn_sdpa_dense_runs();
// Calls that read q, k, v (and wrote dq, dk, dv) in place in a packed projection output.
size_t cudnn_sdpa_packed_runs();
// Graphs built ahead by cudnn_sdpa_prebuild (included in cudnn_sdpa_graph_count once finished).
size_t cudnn_sdpa_graphs_built_ahead();

// Bucketing used for graph keys (exposed for tests): batch → next power of two; max_seqlen →
// next power of two, at least 64; total tokens (the backward's ragged workspace bound) → next
// step of 2^k·{1, 1.25, 1.5, 1.75}, at least 1024.
int64_t bucket_batch(int64_t b);
int64_t bucket_seqlen(int64_t s);
int64_t bucket_tokens(int64_t n);

// Implemented in cuda.cu (the cuDNN file is compiled by the host compiler and launches no
// kernels itself). From cu_seqlens[B+1] and seq_lens[B] fills, for b < B_bucket:
//   seq_len[b]   = b < B ? seq_lens[b] : 0                    (int32, B_bucket entries)
//   off_qo[b]    = cu_seqlens[min(b, B)] * qo_mult            (int64, B_bucket+1 entries)
//   off_kv[b]    = cu_seqlens[min(b, B)] * kv_mult            (likewise)
//   off_stats[b] = cu_seqlens[min(b, B)] * stats_mult         (likewise)
// Offsets are in elements (rows × heads × head dim; rows × heads for the stats).
void launch_sdpa_offsets(const int32_t* cu_seqlens, const int32_t* seq_lens, int64_t B,
                         int64_t B_bucket, int64_t qo_mult, int64_t kv_mult, int64_t stats_mult,
                         int32_t* seq_len, int64_t* off_qo, int64_t* off_kv, int64_t* off_stats);

// Implemented in cuda.cu: lse[B·S, Hq] (row-major, ours) → bhs[B, Hq, S] (packed BHSD, which
// cuDNN < 9.26 requires for the statistics input of a dense backward graph).
void launch_lse_to_bhs(const float* lse, int64_t B, int64_t S, int64_t Hq, float* bhs);

}  // namespace biofm::ops::cuda::attention_detail
