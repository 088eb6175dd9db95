// FP8 delayed scaling (Transformer Engine's DelayedScaling): a tensor is quantized with a scale
// computed from the amaxes of earlier steps, and its own amax is recorded for later ones.
//
// State of N tensors: amax_history [N, L] (F32; row i is tensor i's history, slot 0 the step in
// progress) and scale_amax [N] (F32): the amax a tensor's scale is derived from, i.e.
// scale = fp8_max / scale_amax — what fp8_quantize's `amax` argument takes, so the quantization
// needs no other input. Transformer Engine's scale fp8_max·2^-margin / amax equals
// fp8_max / (amax·2^margin) bit for bit (multiplying by a power of two is exact), so
// scale_amax = amax·2^margin; it starts at fp8_max (TE's initial scale 1).
//
// After each optimizer step (fp8_delayed_update, TE's amax_and_scale_update kernel):
//   amax   = max over the history (fmax: NaNs ignored), or history[0] for most_recent;
//   history rolls by one: h'[i] = h[i+1] for i < L-1, h'[L-1] = h[0], then h'[0] = 0;
//   if amax is finite and > 0: scale_amax = amax·2^margin (a scale that overflows fp32 is
//   clamped to FLT_MAX by the quantization); otherwise the previous scale is kept.
// One launch updates all N tensors on the device; nothing is read back to the host.
#pragma once
#include "biofm/ops/dispatch.h"

namespace biofm::ops {

// history_row: one tensor's [L] row (a view); history_row[0] = max(history_row[0], amax), with
// amax = amax_in (F32 [1], a producer's max |x|) when defined, else max |x| computed here.
void fp8_amax_record(Tensor& history_row, const Tensor& x, const Tensor& amax_in = Tensor());
// The update above for every row. margin >= 0; use_max false = most_recent.
void fp8_delayed_update(Tensor& amax_history, Tensor& scale_amax, int margin, bool use_max);

BIOFM_BACKENDS(fp8_amax_record, fp8_delayed_update)

}  // namespace biofm::ops
