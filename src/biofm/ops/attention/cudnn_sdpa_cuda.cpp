// Attention through cuDNN's fused SDPA (flash attention), built with the cuDNN frontend graph
// API. Host code only (compiled by the C++ compiler in CUDA builds); the one small kernel it
// needs (ragged offsets from cu_seqlens) lives in cuda.cu.
//
// Layout. Our tensors are packed rows: q[N, Hq, D], k/v[N, Hkv, D], out[N, Hq, D], lse[N, Hq].
// cuDNN sees them as ragged BHSD tensors: dims [B, H, S, D], strides [-, D, H·D, 1] and a ragged
// offset per sequence, offset[b] = cu_seqlens[b]·H·D elements, plus a padding mask with actual
// lengths seq_len[b] = seq_lens[b]. Padding rows of a BSHD batch (rows after a sequence's
// seq_lens inside its slot) are simply never touched; cuda.cu zeroes them afterwards.
// q, k and v may instead be the three parts of one fused projection output [N, (Hq + 2·Hkv)·D]
// (SdpaCall::qkv_row): the same views with row stride (Hq + 2·Hkv)·D and offsets
// cu_seqlens[b]·(Hq + 2·Hkv)·D, so attention reads them, and backward writes dq, dk, dv, in
// place without unpacking.
// The softmax statistics (cuDNN's "Stats": natural-log logsumexp of the scaled scores per
// (b, h, s), F32) are declared as a ragged tensor [B, Hq, S, 1] with strides [-, 1, Hq, 1] and
// offset[b] = cu_seqlens[b]·Hq: element (b, h, s) then lives at (cu_seqlens[b] + s)·Hq + h,
// which is exactly our lse[N, Hq]. Forward writes lse in place and backward reads it back, so
// lse needs no conversion and matches the CPU op (log Σ exp(scale·q·k)).
//
// Graph cache. Built graphs (and their execution plans) are cached in a map keyed by
// (bucketed B, bucketed S, bucketed token count for backward, Hq, Hkv, D, causal, direction).
// B is rounded up to a power of two (the extra sequences get length 0 and offsets at the end of
// the batch), S = max_seqlen up to a power of two (at least 64; blocks past a sequence's actual
// length exit at once, so a loose S costs little), and the backward's max_total_seq_len (which
// sizes its ragged dQ/softmax-sum workspaces, so memory) up to a step of 2^k·{1, 1.25, 1.5,
// 1.75}, at least 1024, from N. The attention scale is a pass-by-value graph input, so it is not part of the key. A shape
// whose graph fails to build is remembered (no retry) and reported once on stderr.
//
// Dense graphs. When the caller promises a uniform batch (every sequence exactly max_seqlen
// tokens, back to back: Llama's full windows), S is a power of two (so that the graphs stay few)
// and ops.sdpa_dense is on, the graph is plain BSHD
// of the exact [B, S] with no ragged offsets and no padding mask, which lets cuDNN pick its
// dense kernels (forward +15% on Llama's 8k windows, H100). The forward writes the statistics in
// our [N, Hq] layout; the backward reads a transposed copy ([B, Hq, S], 4 bytes per query and
// head), because cuDNN before 9.26 takes only packed BHSD statistics there. If cuDNN refuses a
// dense graph the ragged one runs instead.
//
// Per call: one device buffer (a Tensor from the caching allocator) holds seq_len, the three
// ragged-offset arrays and cuDNN's workspace; launch_sdpa_offsets fills the former on the
// stream, then the graph executes on the same stream. No host synchronisation.
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>

#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/device_memory_stats.h"
#include "biofm/core/tensor.h"
#include "biofm/ops/attention/cudnn_sdpa.h"

namespace fe = cudnn_frontend;

namespace biofm::ops::cuda::attention_detail {
namespace {

#define BIOFM_CUDNN_CHECK(expr)                                                                  \
  do {                                                                                           \
    cudnnStatus_t st_ = (expr);                                                                  \
    if (st_ != CUDNN_STATUS_SUCCESS)                                                             \
      ::biofm::fail(__FILE__, ":", __LINE__, ": cuDNN error ", int(st_), " (",                   \
                    cudnnGetErrorString(st_), ") in " #expr);                                    \
  } while (0)

// Graph tensor ids (variant pack keys).
enum : int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidScale,
  kUidSeqQ,
  kUidSeqKV,
  kUidOffQO,
  kUidOffKV,
  kUidOffStats,
  kUidFp8Slot0 = 100,  // FP8 graphs: state slot i (op.h's Fp8AttentionSlot) has uid kUidFp8Slot0 + i
};

struct GraphKey {
  int64_t B, S, T, Hq, Hkv, D;
  bool causal, backward;
  bool dense;  // plain BSHD: no ragged offsets, no padding mask (every sequence S long)
  int64_t qkv_row;  // SdpaCall::qkv_row (0: separate q, k, v)
  bool fp8 = false;  // E4M3 (SdpaCall::fp8_state); dense only
  float fp8_attn_scale = 0;  // FP8 graphs take the attention scale as a constant
  auto operator<=>(const GraphKey&) const = default;
};

std::string describe(const GraphKey& k) {
  std::ostringstream os;
  os << (k.backward ? "backward" : "forward") << " B=" << k.B << " S=" << k.S;
  if (k.backward) os << " T=" << k.T;
  os << " Hq=" << k.Hq << " Hkv=" << k.Hkv << " D=" << k.D << (k.causal ? " causal" : " bidirectional")
     << (k.fp8 ? " fp8" : " bf16") << (k.dense ? " dense" : " ragged") << (k.qkv_row ? " packed-qkv" : "");
  return os.str();
}

struct GraphEntry {
  GraphKey key{};
  std::shared_ptr<fe::graph::Graph> graph;  // null when the build failed
  int64_t workspace = 0;
  std::vector<int64_t> fp8_slots;  // FP8 graphs: the state slots they read or write
  std::string error;
  bool tuned = false;  // autotuned on its first execution (ops.sdpa_autotune)
  // Built ahead on a thread of its own (cudnn_sdpa_prebuild): the handle it was built with, which
  // then executes it (null: the shared handle).
  cudnnHandle_t own_handle = nullptr;
};

// ops.sdpa_autotune: build every engine configuration cuDNN offers for a graph and time them
// on the graph's first execution (real data, once per graph), instead of taking the
// heuristic's first choice. Costs build time per graph shape.
bool autotune_enabled() { return op_options().sdpa_autotune; }

std::mutex g_mutex;  // guards everything below
std::map<GraphKey, GraphEntry> g_cache;
size_t g_built = 0;
size_t g_dense_runs = 0;
size_t g_packed_runs = 0;
size_t g_built_ahead = 0;
cudnnHandle_t g_handle = nullptr;
// Keys being built ahead on threads of their own (cudnn_sdpa_prebuild); the builder puts the
// entry into g_cache, a user of the key waits for it (graph_for_locked).
std::map<GraphKey, std::shared_future<void>> g_pending;

// Every graph being built ahead, finished (called without g_mutex held).
void wait_for_builders() {
  std::vector<std::shared_future<void>> pending;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto& [k, f] : g_pending) pending.push_back(f);
  }
  for (auto& f : pending) f.wait();
}

// device_release_at_exit(): the graphs (and their plans) and the handles go before the process
// ends, so that a leak check does not report cuDNN's handle memory.
void release_cudnn() {
  wait_for_builders();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pending.clear();
  std::vector<cudnnHandle_t> own;
  for (auto& [k, e] : g_cache)
    if (e.own_handle) own.push_back(e.own_handle);
  g_cache.clear();
  if (!own.empty()) BIOFM_CUDA_CHECK(cudaStreamSynchronize(cuda_ctx::stream()));
  for (cudnnHandle_t h : own) BIOFM_CUDNN_CHECK(cudnnDestroy(h));
  if (g_handle) {
    BIOFM_CUDA_CHECK(cudaStreamSynchronize(cuda_ctx::stream()));
    BIOFM_CUDNN_CHECK(cudnnDestroy(g_handle));
    g_handle = nullptr;
  }
}

cudnnHandle_t handle_locked() {
  if (!g_handle) {
    BIOFM_CUDNN_CHECK(cudnnCreate(&g_handle));
    on_device_release(release_cudnn);
  }
  // Bound to the op stream on every call (cheap), in case the context's stream changes.
  BIOFM_CUDNN_CHECK(cudnnSetStream(g_handle, cuda_ctx::stream()));
  return g_handle;
}

std::string fe_error(const char* step, fe::error_t e) {
  std::ostringstream os;
  os << step << ": " << e.get_message() << " (frontend error code " << int(e.get_code()) << ")";
  return os.str();
}

std::shared_ptr<fe::graph::Tensor_attributes> index_tensor(fe::graph::Graph& g, const char* name,
                                                           int64_t uid, int64_t n,
                                                           fe::DataType_t dt) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(dt));
}

// [B, H, S, D] view of token rows of `row` elements whose first H·D are the heads: ragged
// (offset[b] = first row of sequence b, times row) when `off` is given, else dense (sequence b
// starts at row b·S). row = H·D for packed [N, H, D]; (Hq + 2·Hkv)·D for a part of a fused
// QKV projection's output.
fe::graph::Tensor_attributes& set_bhsd(fe::graph::Tensor_attributes& t, int64_t uid, int64_t B, int64_t H,
                                       int64_t S, int64_t D,
                                       const std::shared_ptr<fe::graph::Tensor_attributes>& off, int64_t row) {
  t.set_uid(uid).set_dim({B, H, S, D}).set_stride({S * row, D, row, 1});
  if (off) t.set_ragged_offset(off);
  return t;
}

fe::graph::Tensor_attributes bhsd(const char* name, int64_t uid, int64_t B, int64_t H, int64_t S, int64_t D,
                                  const std::shared_ptr<fe::graph::Tensor_attributes>& off, int64_t row) {
  fe::graph::Tensor_attributes t;
  t.set_name(name);
  set_bhsd(t, uid, B, H, S, D, off, row);
  return t;
}

// Stats / lse: element (b, h, s) at offset[b] + s·Hq + h (dense: offset[b] = b·S·Hq), i.e. our
// lse[N, Hq]. `packed_bhs`: element (b, h, s) at (b·Hq + h)·S + s instead — the layout cuDNN
// before 9.26 requires for the statistics input of a dense backward (run() transposes into it).
void set_stats(fe::graph::Tensor_attributes& t, int64_t B, int64_t Hq, int64_t S,
               const std::shared_ptr<fe::graph::Tensor_attributes>& off, bool packed_bhs = false) {
  t.set_uid(kUidStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({B, Hq, S, 1})
      .set_stride(packed_bhs ? std::vector<int64_t>{Hq * S, S, 1, 1} : std::vector<int64_t>{Hq * S, 1, Hq, 1});
  if (off) t.set_ragged_offset(off);
}

std::string finish_build(fe::graph::Graph& g, cudnnHandle_t h, int64_t* workspace) {
  fe::error_t e = g.validate();
  if (!e.is_good()) return fe_error("validate", e);
  e = g.build_operation_graph(h);
  if (!e.is_good()) return fe_error("build_operation_graph", e);
  e = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
  if (!e.is_good()) return fe_error("create_execution_plans", e);
  e = g.check_support(h);
  if (!e.is_good()) return fe_error("check_support", e);
  if (autotune_enabled()) {
    e = g.build_plans(h, fe::BuildPlanPolicy_t::ALL);
    if (!e.is_good()) return fe_error("build_plans(ALL)", e);
    *workspace = g.get_autotune_workspace_size();
    return {};
  }
  e = g.build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
  if (!e.is_good()) return fe_error("build_plans", e);
  e = g.get_workspace_size(*workspace);
  if (!e.is_good()) return fe_error("get_workspace_size", e);
  return {};
}

// The described graph built (or the error why not) into the entry.
GraphEntry finish_entry(GraphEntry entry, std::shared_ptr<fe::graph::Graph> g, cudnnHandle_t h) {
  try {
    entry.error = finish_build(*g, h, &entry.workspace);
  } catch (const std::exception& e) {
    entry.error = std::string("exception while building: ") + e.what();
  }
  if (entry.error.empty()) entry.graph = std::move(g);
  return entry;
}

// cuDNN's FP8 flash attention (dense BSHD, separate q, k, v): E4M3 tensors, scales and amaxes
// in the op's state slots, statistics in packed [B, Hq, S] order (both directions).
GraphEntry build_fp8_graph(const GraphKey& k, cudnnHandle_t h) {
  GraphEntry entry;
  const int64_t B = k.B, S = k.S, Hq = k.Hq, Hkv = k.Hkv, D = k.D;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::FP8_E4M3)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto scalar_attrs = [&](fe::graph::Tensor_attributes& t, int64_t slot) -> fe::graph::Tensor_attributes& {
    entry.fp8_slots.push_back(slot);
    return t.set_uid(kUidFp8Slot0 + slot).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
  };
  auto in = [&](const char* name, int64_t slot) {
    fe::graph::Tensor_attributes t;
    t.set_name(name);
    return g->tensor(scalar_attrs(t, slot));
  };
  auto amax_out = [&](const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t slot) {
    scalar_attrs(t->set_output(true), slot);
  };
  const std::shared_ptr<fe::graph::Tensor_attributes> none;
  auto Q = g->tensor(bhsd("Q", kUidQ, B, Hq, S, D, none, Hq * D));
  auto K = g->tensor(bhsd("K", kUidK, B, Hkv, S, D, none, Hkv * D));
  auto V = g->tensor(bhsd("V", kUidV, B, Hkv, S, D, none, Hkv * D));
  if (!k.backward) {
    auto opts = fe::graph::SDPA_fp8_attributes()
                    .set_name("biofm_sdpa_fp8_fwd")
                    .set_generate_stats(true)
                    .set_causal_mask(k.causal)
                    .set_attn_scale(k.fp8_attn_scale);
    auto r = g->sdpa_fp8(Q, K, V, in("descale_q", kFa8QScaleInv), in("descale_k", kFa8KScaleInv),
                         in("descale_v", kFa8VScaleInv), in("descale_s", kFa8SScaleInv), in("scale_s", kFa8SScale),
                         in("scale_o", kFa8OScale), std::move(opts));
    set_bhsd(r[0]->set_output(true), kUidO, B, Hq, S, D, none, Hq * D);
    r[1]->set_output(true);
    set_stats(*r[1], B, Hq, S, none, /*packed_bhs=*/true);
    amax_out(r[2], kFa8AmaxS);
    amax_out(r[3], kFa8AmaxO);
  } else {
    auto O = g->tensor(bhsd("O", kUidO, B, Hq, S, D, none, Hq * D));
    auto dO = g->tensor(bhsd("dO", kUidDO, B, Hq, S, D, none, Hq * D));
    auto Stats = g->tensor(fe::graph::Tensor_attributes().set_name("Stats"));
    set_stats(*Stats, B, Hq, S, none, /*packed_bhs=*/true);
    auto opts = fe::graph::SDPA_fp8_backward_attributes()
                    .set_name("biofm_sdpa_fp8_bwd")
                    .set_causal_mask(k.causal)
                    .set_attn_scale(k.fp8_attn_scale);
    auto r = g->sdpa_fp8_backward(
        Q, K, V, O, dO, Stats, in("descale_q", kFa8QScaleInv), in("descale_k", kFa8KScaleInv),
        in("descale_v", kFa8VScaleInv), in("descale_o", kFa8OScaleInv), in("descale_dO", kFa8DoScaleInv),
        in("descale_s", kFa8SScaleInv), in("descale_dP", kFa8DpScaleInv), in("scale_s", kFa8SScale),
        in("scale_dQ", kFa8DqScale), in("scale_dK", kFa8DkScale), in("scale_dV", kFa8DvScale),
        in("scale_dP", kFa8DpScale), std::move(opts));
    set_bhsd(r[0]->set_output(true), kUidDQ, B, Hq, S, D, none, Hq * D);
    set_bhsd(r[1]->set_output(true), kUidDK, B, Hkv, S, D, none, Hkv * D);
    set_bhsd(r[2]->set_output(true), kUidDV, B, Hkv, S, D, none, Hkv * D);
    amax_out(r[3], kFa8AmaxDq);
    amax_out(r[4], kFa8AmaxDk);
    amax_out(r[5], kFa8AmaxDv);
    amax_out(r[6], kFa8AmaxDp);
  }
  return finish_entry(std::move(entry), std::move(g), h);
}

GraphEntry build_graph(const GraphKey& k, cudnnHandle_t h) {
  if (k.fp8) return build_fp8_graph(k, h);
  GraphEntry entry;
  const int64_t B = k.B, S = k.S, Hq = k.Hq, Hkv = k.Hkv, D = k.D;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);

  // Ragged graphs take per-sequence offsets and lengths; dense graphs need neither.
  std::shared_ptr<fe::graph::Tensor_attributes> off_qo, off_kv, off_st, seq_q, seq_kv;
  if (!k.dense) {
    off_qo = index_tensor(*g, "offset_qo", kUidOffQO, B + 1, fe::DataType_t::INT64);
    off_kv = index_tensor(*g, "offset_kv", kUidOffKV, B + 1, fe::DataType_t::INT64);
    off_st = index_tensor(*g, "offset_stats", kUidOffStats, B + 1, fe::DataType_t::INT64);
    seq_q = index_tensor(*g, "seq_len_q", kUidSeqQ, B, fe::DataType_t::INT32);
    seq_kv = index_tensor(*g, "seq_len_kv", kUidSeqKV, B, fe::DataType_t::INT32);
  }
  auto scale = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("attn_scale")
                             .set_uid(kUidScale)
                             .set_dim({1, 1, 1, 1})
                             .set_stride({1, 1, 1, 1})
                             .set_is_pass_by_value(true)
                             .set_data_type(fe::DataType_t::FLOAT));
  // Separate q, k, v: rows of Hq·D / Hkv·D, q offsets like out's. Packed: q, k and v rows all
  // qkv_row long, so q takes the k/v offsets (their multiplier is qkv_row, run() below).
  const int64_t row_q = k.qkv_row ? k.qkv_row : Hq * D, row_kv = k.qkv_row ? k.qkv_row : Hkv * D;
  const auto& off_q = k.qkv_row ? off_kv : off_qo;
  auto Q = g->tensor(bhsd("Q", kUidQ, B, Hq, S, D, off_q, row_q));
  auto K = g->tensor(bhsd("K", kUidK, B, Hkv, S, D, off_kv, row_kv));
  auto V = g->tensor(bhsd("V", kUidV, B, Hkv, S, D, off_kv, row_kv));

  if (!k.backward) {
    auto opts = fe::graph::SDPA_attributes().set_name("biofm_sdpa_fwd").set_generate_stats(true).set_attn_scale(scale);
    if (!k.dense) opts.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
    // Top-left diagonal with per-sequence lengths: key j visible to query i iff j <= i.
    if (k.causal)
      opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    auto [O, Stats] = g->sdpa(Q, K, V, std::move(opts));
    set_bhsd(O->set_output(true), kUidO, B, Hq, S, D, off_qo, Hq * D);
    if (!Stats) {
      entry.error = "sdpa returned no Stats tensor";
      return entry;
    }
    Stats->set_output(true);
    set_stats(*Stats, B, Hq, S, off_st);
  } else {
    auto O = g->tensor(bhsd("O", kUidO, B, Hq, S, D, off_qo, Hq * D));
    auto dO = g->tensor(bhsd("dO", kUidDO, B, Hq, S, D, off_qo, Hq * D));
    auto Stats = g->tensor(fe::graph::Tensor_attributes().set_name("Stats"));
    set_stats(*Stats, B, Hq, S, off_st, /*packed_bhs=*/k.dense);
    auto opts = fe::graph::SDPA_backward_attributes().set_name("biofm_sdpa_bwd").set_attn_scale(scale);
    if (!k.dense)
      opts.set_padding_mask(true)
          .set_seq_len_q(seq_q)
          .set_seq_len_kv(seq_kv)
          .set_max_total_seq_len_q(k.T)
          .set_max_total_seq_len_kv(k.T);
    if (k.causal)
      opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, std::move(opts));
    set_bhsd(dQ->set_output(true), kUidDQ, B, Hq, S, D, off_q, row_q);
    set_bhsd(dK->set_output(true), kUidDK, B, Hkv, S, D, off_kv, row_kv);
    set_bhsd(dV->set_output(true), kUidDV, B, Hkv, S, D, off_kv, row_kv);
  }

  return finish_entry(std::move(entry), std::move(g), h);
}

// Builds the graph for `k` with handle h (no lock needed); failures are in the entry.
GraphEntry build_entry(const GraphKey& k, cudnnHandle_t h, double* ms) {
  GraphEntry entry;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    entry = build_graph(k, h);
  } catch (const std::exception& e) {
    entry.graph = nullptr;
    entry.error = std::string("exception while describing the graph: ") + e.what();
  }
  entry.key = k;
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return entry;
}

// Puts a built entry into the cache (g_mutex held) and says what happened.
GraphEntry& insert_locked(GraphEntry entry, double ms, const char* how) {
  ++g_built;
  const GraphKey k = entry.key;
  if (!entry.graph)
    std::fprintf(stderr, "biofm attention: cuDNN SDPA graph (%s) unavailable: %s\n", describe(k).c_str(),
                 entry.error.c_str());
  else if (op_options().attention_verbose)
    std::fprintf(stderr, "biofm attention: built cuDNN SDPA graph (%s) in %.1f ms%s\n", describe(k).c_str(), ms, how);
  return g_cache.emplace(k, std::move(entry)).first->second;
}

// The graph for `k`: cached, or being built ahead (then this waits for it, g_mutex released
// meanwhile), or built here on first use; null (and *why set) when it cannot be built.
GraphEntry& graph_for_locked(const GraphKey& k, cudnnHandle_t h, std::unique_lock<std::mutex>& lock) {
  for (;;) {
    auto it = g_cache.find(k);
    if (it != g_cache.end()) {
      g_pending.erase(k);
      return it->second;
    }
    auto p = g_pending.find(k);
    if (p == g_pending.end()) break;
    const std::shared_future<void> building = p->second;
    lock.unlock();
    building.wait();
    lock.lock();
    g_pending.erase(k);  // done: its entry is in g_cache, or (no handle for it) it is built below
  }
  double ms = 0;
  GraphEntry entry = build_entry(k, h, &ms);
  return insert_locked(std::move(entry), ms, "");
}

constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Whether a call tries cuDNN's dense graph of its exact shape first: uniform batches of a
// power-of-two length (full training windows), so that single sequences of every length (eval,
// embed, generate) do not each build a graph of their own.
bool try_dense(const SdpaCall& c) {
  return c.uniform && op_options().sdpa_dense && c.max_seqlen == bucket_seqlen(c.max_seqlen);
}

// The graph a call runs: its bucket's ragged graph, or, for a uniform batch (every sequence
// max_seqlen long, back to back) that tries the dense graph of its exact shape, that one (should
// cuDNN refuse it, the ragged graph serves the batch as any other).
GraphKey ragged_key_for(const SdpaCall& c, bool backward) {
  return GraphKey{bucket_batch(c.B), bucket_seqlen(c.max_seqlen), backward ? bucket_tokens(c.N) : 0,
                  c.Hq, c.Hkv, c.D, c.causal, backward, false, c.qkv_row};
}
GraphKey dense_key_for(const SdpaCall& c, bool backward) {
  return GraphKey{c.B, c.max_seqlen, 0, c.Hq, c.Hkv, c.D, c.causal, backward, true, c.qkv_row};
}
GraphKey fp8_key_for(const SdpaCall& c, bool backward) {
  GraphKey k = dense_key_for(c, backward);
  k.fp8 = true;
  k.fp8_attn_scale = c.scale;
  return k;
}

bool run(const SdpaCall& c, bool backward, std::string* why) {
  const GraphKey ragged_key = ragged_key_for(c, backward), dense_key = dense_key_for(c, backward);
  std::unique_lock<std::mutex> lock(g_mutex);
  cudnnHandle_t h = handle_locked();
  const bool fp8 = c.fp8_state != nullptr;
  if (fp8 && !(c.uniform && c.max_seqlen > 0 && c.N == c.B * c.max_seqlen && c.qkv_row == 0)) {
    if (why) *why = "FP8 attention takes uniform batches (full windows) of separate q, k, v only";
    return false;
  }
  GraphEntry* found = fp8 ? &graph_for_locked(fp8_key_for(c, backward), h, lock)
                      : try_dense(c) ? &graph_for_locked(dense_key, h, lock) : nullptr;
  if (!fp8 && (!found || !found->graph)) found = &graph_for_locked(ragged_key, h, lock);
  GraphEntry& entry = *found;
  if (entry.own_handle) {  // built ahead: executes with the handle that built it
    BIOFM_CUDNN_CHECK(cudnnSetStream(entry.own_handle, cuda_ctx::stream()));
    h = entry.own_handle;
  }
  const GraphKey& key = entry.key;
  if (!entry.graph) {
    if (why) *why = "cuDNN graph (" + describe(key) + "): " + entry.error;
    return false;
  }

  // Scratch: for ragged graphs seq_len (int32, Bb) and three offset arrays (int64, Bb+1 each);
  // then cuDNN's workspace.
  const int64_t Bb = key.B;
  const size_t seq_bytes = key.dense ? 0 : align_up(size_t(Bb) * sizeof(int32_t), 256);
  const size_t off_bytes = key.dense ? 0 : align_up(size_t(Bb + 1) * sizeof(int64_t), 256);
  // A dense backward reads the statistics as packed [B, Hq, S]: a transposed copy of lse.
  // (FP8 keeps its statistics in that order from the start.)
  const size_t bhs_bytes = key.dense && backward && !key.fp8 ? align_up(size_t(c.N * c.Hq) * sizeof(float), 256) : 0;
  const size_t head = seq_bytes + 3 * off_bytes + bhs_bytes;
  const size_t total = std::max<size_t>(head + size_t(std::max<int64_t>(entry.workspace, 0)), 1);
  Tensor scratch = Tensor::empty({int64_t(total)}, DType::U8, Device::CUDA);
  char* base = static_cast<char*>(scratch.raw());
  auto* seq_len = reinterpret_cast<int32_t*>(base);
  auto* off_qo = reinterpret_cast<int64_t*>(base + seq_bytes);
  auto* off_kv = reinterpret_cast<int64_t*>(base + seq_bytes + off_bytes);
  auto* off_st = reinterpret_cast<int64_t*>(base + seq_bytes + 2 * off_bytes);
  auto* stats_bhs = reinterpret_cast<float*>(base + seq_bytes + 3 * off_bytes);
  void* workspace = entry.workspace > 0 ? base + head : nullptr;
  if (bhs_bytes) launch_lse_to_bhs(c.lse, c.B, c.max_seqlen, c.Hq, stats_bhs);

  if (!key.dense)
    launch_sdpa_offsets(c.cu_seqlens, c.seq_lens, c.B, Bb, c.Hq * c.D, c.qkv_row ? c.qkv_row : c.Hkv * c.D, c.Hq,
                        seq_len, off_qo, off_kv, off_st);

  float scale = c.scale;
  std::unordered_map<int64_t, void*> pack = {
      {kUidQ, const_cast<void*>(c.q)},
      {kUidK, const_cast<void*>(c.k)},
      {kUidV, const_cast<void*>(c.v)},
      {kUidO, c.out},
      {kUidStats, bhs_bytes ? stats_bhs : c.lse},
      {kUidScale, &scale},
  };
  if (!key.dense) {
    pack[kUidSeqQ] = seq_len;
    pack[kUidSeqKV] = seq_len;
    pack[kUidOffQO] = off_qo;
    pack[kUidOffKV] = off_kv;
    pack[kUidOffStats] = off_st;
  }
  if (backward) {
    pack[kUidDO] = const_cast<void*>(c.dout);
    pack[kUidDQ] = c.dq;
    pack[kUidDK] = c.dk;
    pack[kUidDV] = c.dv;
  }
  if (key.fp8) {
    pack.erase(kUidScale);  // a constant in FP8 graphs
    for (int64_t slot : entry.fp8_slots) pack[kUidFp8Slot0 + slot] = c.fp8_state + slot;
  }
  fe::error_t e;
  try {
    if (autotune_enabled() && !entry.tuned) {
      entry.tuned = true;
      e = entry.graph->autotune(h, pack, workspace);
      std::fprintf(stderr, "biofm attention: cuDNN SDPA graph (%s): autotuned over %lld plans%s%s\n",
                   describe(key).c_str(), (long long)entry.graph->get_execution_plan_count(),
                   e.is_good() ? "" : ", failed: ", e.is_good() ? "" : e.get_message().c_str());
    }
    e = entry.graph->execute(h, pack, workspace);
  } catch (const std::exception& ex) {
    if (why) *why = "cuDNN graph (" + describe(key) + ") execute threw: " + ex.what();
    return false;
  }
  if (!e.is_good()) {
    if (why) *why = "cuDNN graph (" + describe(key) + ") " + fe_error("execute", e);
    return false;
  }
  BIOFM_CUDA_LAUNCH_CHECK();
  g_dense_runs += key.dense;
  g_packed_runs += key.qkv_row != 0;
  return true;
}

int64_t quarter_steps(int64_t x) {
  // Smallest 2^k·{1, 1.25, 1.5, 1.75} >= x.
  if (x <= 4) return std::max<int64_t>(x, 1);
  const int64_t p = int64_t(std::bit_floor(uint64_t(x)));
  const int64_t step = p / 4;
  return (x + step - 1) / step * step;
}

}  // namespace

int64_t bucket_batch(int64_t b) { return int64_t(std::bit_ceil(uint64_t(std::max<int64_t>(b, 1)))); }

int64_t bucket_seqlen(int64_t s) { return int64_t(std::bit_ceil(uint64_t(std::max<int64_t>(s, 64)))); }

int64_t bucket_tokens(int64_t n) { return quarter_steps(std::max<int64_t>(n, 1024)); }

bool cudnn_sdpa_supported(DType dtype, int64_t head_dim, int64_t hq, int64_t hkv, std::string* why) {
  auto no = [&](const std::string& m) {
    if (why) *why = m;
    return false;
  };
  if (dtype != DType::BF16) return no(std::string("dtype ") + dtype_name(dtype) + " (cuDNN path is BF16 only)");
  if (head_dim < 8 || head_dim > 128 || head_dim % 8 != 0)
    return no("head dim " + std::to_string(head_dim) + " (cuDNN path takes multiples of 8 up to 128)");
  if (hkv <= 0 || hq % hkv != 0) return no("query heads not a multiple of kv heads");
  // Process-wide facts, read once.
  static const int sm = cuda_compute_capability();
  static const size_t version = cudnnGetVersion();
  if (sm < 90) return no("GPU compute capability " + std::to_string(sm / 10) + "." + std::to_string(sm % 10) +
                         " (ragged THD SDPA needs 9.0+)");
  if (sm == 120 || sm == 121) return no("SM 12.x (ragged statistics unsupported)");
  if (version < 90600)
    return no("cuDNN " + std::to_string(version) + " (ragged GQA SDPA needs 9.6.0+)");
  return true;
}

bool cudnn_sdpa_forward(const SdpaCall& c, std::string* why) { return run(c, false, why); }
bool cudnn_sdpa_backward(const SdpaCall& c, std::string* why) { return run(c, true, why); }

void cudnn_sdpa_prebuild(const std::vector<SdpaCall>& calls, bool backward) {
  int device = 0;
  BIOFM_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const SdpaCall& c : calls) {
    const GraphKey k = try_dense(c) ? dense_key_for(c, backward) : ragged_key_for(c, backward);
    if (g_cache.contains(k) || g_pending.contains(k)) continue;
    // One thread and one cuDNN handle per graph (a handle is not to be used by two threads at
    // once); the handle stays with the graph and executes it.
    g_pending[k] = std::async(std::launch::async, [k, device] {
                     // Without a handle of its own nothing is built here: the first pass that
                     // needs the graph builds it as usual.
                     cudnnHandle_t h = nullptr;
                     if (cudaSetDevice(device) != cudaSuccess || cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return;
                     double ms = 0;
                     GraphEntry entry = build_entry(k, h, &ms);
                     std::lock_guard<std::mutex> lock(g_mutex);
                     ++g_built_ahead;
                     if (entry.graph)
                       entry.own_handle = h;
                     else
                       cudnnDestroy(h);
                     insert_locked(std::move(entry), ms, " (ahead, on its own thread)");
                   }).share();
  }
}

size_t cudnn_sdpa_graph_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_built;
}

size_t cudnn_sdpa_graphs_built_ahead() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_built_ahead;
}

size_t cudnn_sdpa_dense_runs() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_dense_runs;
}

size_t cudnn_sdpa_packed_runs() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_packed_runs;
}

}  // namespace biofm::ops::cuda::attention_detail
