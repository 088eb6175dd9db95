// FP8 attention (fp8_dpa) on the GPU: q, k, v (and dout) quantized with current scaling, cuDNN's
// FP8 flash attention (cudnn_sdpa_cuda.cpp) in between, its E4M3 outputs read back into the
// caller's dtype. The scales cuDNN reads are set on the device by one-thread kernels from the
// state's slots (op.h), so nothing waits on the host. CPU reference: cpu_fp8.cpp.
#include <atomic>
#include <cfloat>

#include "biofm/core/cuda_context.h"
#include "biofm/ops/attention/cudnn_sdpa.h"
#include "biofm/ops/attention/op.h"
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;
namespace {

using attention_detail::SdpaCall;
std::atomic<int64_t> g_calls{0};
constexpr float kE4M3Max = 448.0f;

// state[scale_slot] = 448 / amax (1 when amax is 0 or not finite; clamped to FLT_MAX as the
// quantization's), state[scale_slot + 1] its inverse: fp8_scale_for's rule.
__device__ void set_scale(float* st, int64_t scale_slot, float amax) {
  float s = amax > 0.0f && isfinite(amax) ? kE4M3Max / amax : 1.0f;
  if (!isfinite(s)) s = FLT_MAX;
  st[scale_slot] = s;
  st[scale_slot + 1] = 1.0f / s;
}

// Forward: the probabilities' fixed scale; the output's from amax(v) = 448·scale_inv(v).
__global__ void forward_scales_kernel(float* st) {
  st[kFa8SScale] = kE4M3Max;
  st[kFa8SScaleInv] = 1.0f / kE4M3Max;
  set_scale(st, kFa8OScale, 2.0f * kE4M3Max * st[kFa8VScaleInv]);
}

// Backward: dq, dk, dv, dP from the largest amax of their histories (two binades of headroom),
// after folding in the last backward's. Calibrating (no amaxes yet): dP from its bound
// 2·D·amax(dout)·amax(v) and the outputs at scale 1 (that pass only measures their amaxes);
// then (calibrated) from the amaxes that pass measured, which go into no history.
enum class ScaleMode { Calibrating, Calibrated, FromHistory };
__global__ void backward_scales_kernel(float* st, int64_t D, ScaleMode mode) {
  const int64_t amax_slot[4] = {kFa8AmaxDq, kFa8AmaxDk, kFa8AmaxDv, kFa8AmaxDp},
                scale_slot[4] = {kFa8DqScale, kFa8DkScale, kFa8DvScale, kFa8DpScale};
  if (mode == ScaleMode::Calibrated) {
    for (int i = 0; i < 4; ++i) set_scale(st, scale_slot[i], 4.0f * st[amax_slot[i]]);
    return;
  }
  if (mode == ScaleMode::Calibrating) {
    const float amax_do = kE4M3Max * st[kFa8DoScaleInv], amax_v = kE4M3Max * st[kFa8VScaleInv];
    set_scale(st, kFa8DpScale, 2.0f * float(D) * amax_do * amax_v);
    set_scale(st, kFa8DqScale, 0.0f);
    set_scale(st, kFa8DkScale, 0.0f);
    set_scale(st, kFa8DvScale, 0.0f);
    return;
  }
  const int64_t next = int64_t(st[kFa8HistoryNext]);
  for (int i = 0; i < 4; ++i) {
    float* hist = st + kFa8History + i * kFp8AttentionHistory;
    hist[next] = st[amax_slot[i]];
    float amax = 0.0f;
    for (int64_t j = 0; j < kFp8AttentionHistory; ++j) amax = fmaxf(amax, hist[j]);
    set_scale(st, scale_slot[i], 4.0f * amax);
  }
  st[kFa8HistoryNext] = float((next + 1) % kFp8AttentionHistory);
}

Tensor slot(Tensor& state, int64_t i) { return state.narrow0(i, 1); }

Tensor rows_of(const Tensor& t) { return t.view({t.size(0), t.numel() / std::max<int64_t>(t.size(0), 1)}); }

// x's E4M3 codes (shaped like x) with current scaling; scale_inv into its slot.
Tensor quantize(Tensor& state, int64_t scale_inv_slot, const Tensor& x) {
  Tensor codes = Tensor::empty(x.shape(), DType::U8, Device::CUDA);
  Tensor c2 = rows_of(codes), none, si = slot(state, scale_inv_slot);
  cuda::fp8_quantize(c2, none, si, rows_of(x), Fp8Type::E4M3);
  return codes;
}

void dequantize_into(Tensor& x, const Tensor& codes, Tensor& state, int64_t scale_inv_slot) {
  Tensor x2 = rows_of(x);
  cuda::fp8_dequantize(x2, rows_of(codes), slot(state, scale_inv_slot), Fp8Type::E4M3);
}

SdpaCall call_for(const char* op, const Tensor& q_like, int64_t Hkv, const Tensor& cu_seqlens,
                  const Tensor& seq_lens, const AttentionShape& a, Tensor& state) {
  require_cuda(state, op, "state");
  if (state.dtype() != DType::F32 || state.numel() != kFp8AttentionSlots)
    fail(op, ": state must be F32 [", int64_t(kFp8AttentionSlots), "], got ", state.describe());
  if (q_like.dim() != 3) fail(op, ": q must be [N, Hq, D], got ", q_like.describe());
  SdpaCall c;
  c.N = q_like.size(0), c.B = seq_lens.numel(), c.Hq = q_like.size(1), c.Hkv = Hkv, c.D = q_like.size(2);
  c.max_seqlen = a.max_seqlen, c.scale = a.scale, c.causal = a.causal, c.uniform = a.uniform;
  if (!a.uniform || a.max_seqlen <= 0 || c.N != c.B * int64_t(a.max_seqlen))
    fail(op, ": FP8 attention takes uniform batches only (every sequence max_seqlen tokens, back to back)");
  c.cu_seqlens = cu_seqlens.i32(), c.seq_lens = seq_lens.i32();
  c.fp8_state = state.f32();
  return c;
}

}  // namespace

void attention_forward_fp8(Tensor& out, Fp8AttentionSaved& saved, Tensor& state, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_forward_fp8 (CUDA)";
  require_cuda(q, op, "q");
  if (k.dim() != 3 || v.shape() != k.shape() || k.size(0) != q.size(0) || k.size(2) != q.size(2))
    fail(op, ": k and v must be [N, Hkv, D] beside q ", q.describe(), ", got ", k.describe(), " and ", v.describe());
  if (out.shape() != q.shape()) fail(op, ": out must be shaped like q, got ", out.describe());
  SdpaCall c = call_for(op, q, k.size(1), cu_seqlens, seq_lens, a, state);
  saved.q = quantize(state, kFa8QScaleInv, q);
  saved.k = quantize(state, kFa8KScaleInv, k);
  saved.v = quantize(state, kFa8VScaleInv, v);
  saved.out = Tensor::empty(q.shape(), DType::U8, Device::CUDA);
  saved.stats = Tensor::empty({c.N, c.Hq}, DType::F32, Device::CUDA);
  if (c.N == 0) return;
  forward_scales_kernel<<<1, 1, 0, cuda_ctx::stream()>>>(state.f32());
  BIOFM_CUDA_LAUNCH_CHECK();
  c.q = saved.q.raw(), c.k = saved.k.raw(), c.v = saved.v.raw(), c.out = saved.out.raw(), c.lse = saved.stats.f32();
  std::string why;
  if (!attention_detail::cudnn_sdpa_forward(c, &why)) fail(op, ": cuDNN's FP8 attention failed: ", why);
  dequantize_into(out, saved.out, state, kFa8OScaleInv);
  saved.scales = state.narrow0(0, kFa8SavedSlots).clone();
  ++g_calls;
}

int64_t attention_fp8_calls() { return g_calls.load(); }

void attention_backward_fp8(Tensor& dq, Tensor& dk, Tensor& dv, Tensor& state, const Tensor& dout,
                            const Fp8AttentionSaved& saved, const Tensor& cu_seqlens, const Tensor& seq_lens,
                            const AttentionShape& a, bool calibrate) {
  const char* op = "attention_backward_fp8 (CUDA)";
  require_cuda(dout, op, "dout");
  if (dout.shape() != saved.q.shape() || dq.shape() != saved.q.shape() || dk.shape() != saved.k.shape() ||
      dv.shape() != saved.v.shape())
    fail(op, ": dout, dq must be shaped like q ", saved.q.describe(), ", dk and dv like k ", saved.k.describe());
  SdpaCall c = call_for(op, saved.q, saved.k.size(1), cu_seqlens, seq_lens, a, state);
  if (c.N == 0) return;
  if (!saved.scales.defined()) fail(op, ": saved holds no forward's scales");
  Tensor head = state.narrow0(0, kFa8SavedSlots);
  head.copy_from(saved.scales);
  const Tensor dout_codes = quantize(state, kFa8DoScaleInv, dout);
  Tensor dq8 = Tensor::empty(dq.shape(), DType::U8, Device::CUDA), dk8 = Tensor::empty(dk.shape(), DType::U8, Device::CUDA),
         dv8 = Tensor::empty(dv.shape(), DType::U8, Device::CUDA);
  c.q = saved.q.raw(), c.k = saved.k.raw(), c.v = saved.v.raw(), c.out = saved.out.raw(), c.lse = saved.stats.f32();
  c.dout = dout_codes.raw(), c.dq = dq8.raw(), c.dk = dk8.raw(), c.dv = dv8.raw();
  for (int pass = calibrate ? 0 : 1; pass < 2; ++pass) {
    const ScaleMode mode = pass == 0 ? ScaleMode::Calibrating : calibrate ? ScaleMode::Calibrated : ScaleMode::FromHistory;
    backward_scales_kernel<<<1, 1, 0, cuda_ctx::stream()>>>(state.f32(), c.D, mode);
    BIOFM_CUDA_LAUNCH_CHECK();
    std::string why;
    if (!attention_detail::cudnn_sdpa_backward(c, &why)) fail(op, ": cuDNN's FP8 attention failed: ", why);
  }
  dequantize_into(dq, dq8, state, kFa8DqScaleInv);
  dequantize_into(dk, dk8, state, kFa8DkScaleInv);
  dequantize_into(dv, dv8, state, kFa8DvScaleInv);
}

}  // namespace biofm::ops::cuda
