// FP8 attention (fp8_dpa) on the CPU: the reference the GPU's cuDNN FP8 attention is checked
// against, and emulated training on the CPU. op.h says what is quantized with which scale; here
// the probabilities and the score gradient stay fp32, everything else goes through E4M3 codes.
#include <algorithm>
#include <cmath>

#include "biofm/ops/attention/op.h"
#include "biofm/ops/cpu_util.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

constexpr Fp8Type kE4M3 = Fp8Type::E4M3;

Tensor slot(Tensor& state, int64_t i) { return state.narrow0(i, 1); }

// The codes of x [N, ...] (U8, shaped like x) with the scale of `amax` (undefined: x's own
// amax, current scaling), its scale_inv into `scale_inv`; returns what the codes read back to.
Tensor quantize(Tensor& codes, Tensor scale_inv, const Tensor& x, const Tensor& amax = Tensor()) {
  codes = Tensor::empty(x.shape(), DType::U8, Device::CPU);
  Tensor back = Tensor::empty(x.shape(), DType::F32, Device::CPU);
  if (x.numel() == 0) return back;
  const int64_t R = x.size(0), C = x.numel() / R;
  Tensor c2 = codes.view({R, C}), b2 = back.view({R, C}), none;
  cpu::fp8_quantize(c2, none, scale_inv, x.view({R, C}), kE4M3, amax);
  cpu::fp8_dequantize(b2, c2, scale_inv, kE4M3);
  return back;
}

Tensor dequantize(const Tensor& codes, Tensor scale_inv) {
  Tensor back = Tensor::empty(codes.shape(), DType::F32, Device::CPU);
  if (codes.numel() == 0) return back;
  const int64_t R = codes.size(0), C = codes.numel() / R;
  Tensor b2 = back.view({R, C});
  cpu::fp8_dequantize(b2, codes.view({R, C}), scale_inv, kE4M3);
  return back;
}

Tensor scalar(float v) { return Tensor::from_f32({1}, {v}); }

}  // namespace

void attention_forward_fp8(Tensor& out, Fp8AttentionSaved& saved, Tensor& state, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_forward_fp8";
  require_f32_shape(state, {kFp8AttentionSlots}, op, "state");
  require_f32_shape(out, q.shape(), op, "out");
  float* st = state.f32();
  const Tensor qd = quantize(saved.q, slot(state, kFa8QScaleInv), q);
  const Tensor kd = quantize(saved.k, slot(state, kFa8KScaleInv), k);
  const Tensor vd = quantize(saved.v, slot(state, kFa8VScaleInv), v);
  st[kFa8SScale] = fp8_max(kE4M3);
  st[kFa8SScaleInv] = 1.0f / fp8_max(kE4M3);
  saved.stats = Tensor::empty({q.size(0), q.size(1)}, DType::F32, Device::CPU);
  Tensor o32 = Tensor::empty(q.shape(), DType::F32, Device::CPU);
  cpu::attention_forward(o32, saved.stats, qd, kd, vd, cu_seqlens, seq_lens, a);
  st[kFa8AmaxO] = max_abs(o32.f32(), o32.numel());
  // amax(v) as the GPU knows it: from v's scale_inv.
  const float amax_v = fp8_max(kE4M3) * st[kFa8VScaleInv];
  out.copy_from(quantize(saved.out, slot(state, kFa8OScaleInv), o32, scalar(2.0f * amax_v)));
  st[kFa8OScale] = 1.0f / st[kFa8OScaleInv];
  saved.scales = state.narrow0(0, kFa8SavedSlots).clone();
}

void attention_backward_fp8(Tensor& dq, Tensor& dk, Tensor& dv, Tensor& state, const Tensor& dout,
                            const Fp8AttentionSaved& saved, const Tensor& cu_seqlens, const Tensor& seq_lens,
                            const AttentionShape& a, bool calibrate) {
  const char* op = "attention_backward_fp8";
  require_f32_shape(state, {kFp8AttentionSlots}, op, "state");
  require_f32_shape(dout, saved.q.shape(), op, "dout");
  require_f32_shape(dq, saved.q.shape(), op, "dq");
  require_f32_shape(dk, saved.k.shape(), op, "dk");
  require_f32_shape(dv, saved.v.shape(), op, "dv");
  if (!saved.scales.defined()) fail(op, ": saved holds no forward's scales");
  Tensor head = state.narrow0(0, kFa8SavedSlots);
  head.copy_from(saved.scales);
  float* st = state.f32();
  Tensor dout_codes;
  const Tensor dod = quantize(dout_codes, slot(state, kFa8DoScaleInv), dout);
  const Tensor qd = dequantize(saved.q, slot(state, kFa8QScaleInv)), kd = dequantize(saved.k, slot(state, kFa8KScaleInv)),
               vd = dequantize(saved.v, slot(state, kFa8VScaleInv)), od = dequantize(saved.out, slot(state, kFa8OScaleInv));
  Tensor g[3] = {Tensor::empty(dq.shape(), DType::F32, Device::CPU), Tensor::empty(dk.shape(), DType::F32, Device::CPU),
                 Tensor::empty(dv.shape(), DType::F32, Device::CPU)};
  cpu::attention_backward(g[0], g[1], g[2], dod, qd, kd, vd, od, saved.stats, cu_seqlens, seq_lens, a);
  // Delayed scaling: the largest amax of the history after folding in the previous backward's,
  // or (calibrating) this one's, which the GPU measures in its first pass. (dP is not rounded
  // here; its history is kept all the same.)
  Tensor* outs[3] = {&dq, &dk, &dv};
  const int64_t amax_slot[4] = {kFa8AmaxDq, kFa8AmaxDk, kFa8AmaxDv, kFa8AmaxDp},
                scale_slot[3] = {kFa8DqScale, kFa8DkScale, kFa8DvScale};
  float history_max[4] = {0, 0, 0, 0};
  if (!calibrate) {
    const int64_t next = int64_t(st[kFa8HistoryNext]);
    for (int i = 0; i < 4; ++i) {
      float* hist = st + kFa8History + i * kFp8AttentionHistory;
      hist[next] = st[amax_slot[i]];
      for (int64_t j = 0; j < kFp8AttentionHistory; ++j) history_max[i] = std::max(history_max[i], hist[j]);
    }
    st[kFa8HistoryNext] = float((next + 1) % kFp8AttentionHistory);
  }
  for (int i = 0; i < 3; ++i) {
    const float now = max_abs(g[i].f32(), g[i].numel());
    const float used = calibrate ? now : history_max[i];
    Tensor codes;
    outs[i]->copy_from(quantize(codes, slot(state, scale_slot[i] + 1), g[i], scalar(4.0f * used)));
    st[scale_slot[i]] = 1.0f / st[scale_slot[i] + 1];
    st[amax_slot[i]] = now;
  }
}

}  // namespace biofm::ops::cpu
