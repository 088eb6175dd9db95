#include "biofm/models/blocks/linear.h"

#include <cstdio>

#include "biofm/ops/blockscale/op.h"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/fp8/delayed.h"
#include "biofm/ops/options.h"

namespace biofm {

using ops::Fp8Scaling;
using ops::LayerFormat;

ParamRef::ParamRef(const ParamStore& store, const std::vector<std::string>& names) {
  if (names.empty()) return;
  (void)store.concat_shape(names);  // checks that the names are adjacent and stackable
  first_ = store.index(names[0]);
  count_ = names.size();
}

namespace {
ops::Fp8BlockRecipe block_recipe(const ops::LayerQuant& q) { return {q.fwd, q.bwd, q.block_f32_scales}; }
}  // namespace

bool Linear::fp8() const {
  const ops::LayerQuant* q = ctx_ ? ctx_->quant_of(layer_) : nullptr;
  return q && q->format == LayerFormat::Fp8 && (q->scaling == Fp8Scaling::Current || q->scaling == Fp8Scaling::Delayed);
}

ops::Fp8WeightCodes* Linear::codes(const Tensor& w) const {
  // Only weights of the store: its version() is what says they changed.
  const ParamStore& p = *ctx_->params;
  if (w.device() != Device::CUDA || !p.owns(w.raw())) return nullptr;
  if (p.version() != codes_version_ || ctx_->fp8_epoch != codes_epoch_) {
    codes_ = ops::Fp8WeightCodes{};
    codes_.forward_only = !p.has_gradients();  // an inference model: no wᵀ codes
    codes_version_ = p.version();
    codes_epoch_ = ctx_->fp8_epoch;
  }
  return &codes_;
}

bool Linear::weight_codes_due() const {
  const ops::LayerQuant* q = ctx_ ? ctx_->quant_of(layer_) : nullptr;
  if (!q || q->format != LayerFormat::Fp8) return false;
  const bool delayed = q->scaling == Fp8Scaling::Delayed;
  if (!delayed && q->scaling != Fp8Scaling::Current) return false;
  const Tensor w = weight();
  const ops::Fp8WeightCodes* wc = codes(w);
  // (current scaling: the shapes and alignment ops::linear_forward_fp8 quantizes w for)
  return wc && !wc->codes.defined() && w.size(0) % 16 == 0 && w.size(1) % 16 == 0 && (delayed || aligned16(w));
}

bool Linear::make_weight_codes() const {
  if (!weight_codes_due()) return false;
  const ops::LayerQuant* q = ctx_->quant_of(layer_);
  const bool delayed = q->scaling == Fp8Scaling::Delayed;
  const Tensor w = weight();
  ops::Fp8WeightCodes* wc = codes(w);
  const int64_t O = w.size(0), I = w.size(1);
  wc->codes = Tensor::empty({O, I}, DType::U8, Device::CUDA);
  if (delayed || !wc->forward_only) wc->codes_t = Tensor::empty({I, O}, DType::U8, Device::CUDA);
  wc->scale_inv = Tensor::empty({1}, DType::F32, Device::CUDA);
  // Delayed: the scale from the history, and the weight's amax goes into its history in the
  // same pass. Current: the amax computed from w, as linear_forward_fp8 would.
  if (delayed)
    ops::fp8_quantize(wc->codes, wc->codes_t, wc->scale_inv, w, q->fwd, scale_amax(1), Tensor(), history_row(1));
  else
    ops::fp8_quantize(wc->codes, wc->codes_t, wc->scale_inv, w, q->fwd, Tensor(), Tensor(), Tensor());
  return true;
}

const ops::LayerQuant* Linear::producer_quant() const {
  const ops::LayerQuant* q = ctx_ ? ctx_->quant_of(layer_) : nullptr;
  if (!q || q->format != LayerFormat::Fp8 || q->scaling != Fp8Scaling::Delayed || ctx_->stats) return nullptr;
  return weight().device() == Device::CUDA ? q : nullptr;
}

bool Linear::takes_codes() const {
  if (!producer_quant()) return false;
  const Tensor w = weight();
  return w.size(0) % 16 == 0 && w.size(1) % 16 == 0 && aligned16(w);
}

Tensor Linear::history_row(int role) const {
  const int64_t L = ctx_->delayed_history.size(1);
  return ctx_->delayed_history.flat_slice((int64_t(layer_ * 4 + proj_) * 3 + role) * L, {L});
}

Tensor Linear::scale_amax(int role) const {
  return ctx_->delayed_scale_amax.flat_slice(int64_t(layer_ * 4 + proj_) * 3 + role, {1});
}

void Linear::forward(Tensor& out, const Tensor& x, const Tensor& residual, ops::Fp8SavedInput* save,
                     const Tensor& x_amax, const ops::Fp8Codes* x_codes) const {
  const Tensor w = weight(), b = b_.weight(*ctx_->params);
  const ops::LayerQuant* q = ctx_->quant_of(layer_);
  if (x_codes) {  // (the GEMM reads the codes' own scale_inv; producers use producer_scale_amax(0))
    if (!producer_quant()) fail("Linear::forward: input codes from a producer need DelayedScaling on CUDA");
    if (x_amax.defined()) fail("Linear::forward: the producer of input codes records their amax itself");
    return forward_delayed(out, x, w, b, residual, *q, save, x_amax, x_codes);
  }
  if (!q) return ops::linear_forward(out, x, w, b, residual);
  if (ctx_->stats) {
    collect_stats(0, x, *q);
    collect_stats(1, w, *q);
  }
  if (q->format == LayerFormat::Fp8 && q->scaling == Fp8Scaling::Current)
    return ops::linear_forward_fp8(out, x, w, b, residual, {q->fwd, q->bwd}, save, x_amax, codes(w));
  if (q->format == LayerFormat::Fp8 && q->scaling == Fp8Scaling::Delayed)
    return forward_delayed(out, x, w, b, residual, *q, save, x_amax, nullptr);
  if (q->format == LayerFormat::Fp8 && q->scaling == Fp8Scaling::Block)
    return ops::linear_forward_fp8_block(out, x, w, b, residual, block_recipe(*q), save, codes(w));
  forward_emulated(out, x, w, b, residual, *q);
}

void Linear::backward(Tensor& dx, const Tensor& dout, const Tensor& x, const ops::Fp8SavedInput* saved,
                      const Tensor& dout_amax, const ops::Fp8Codes* dout_codes) const {
  const ParamStore& p = *ctx_->params;
  const Tensor w = weight();
  Tensor dw = w_.grad(p), db = b_.grad(p);
  const ops::LayerQuant* q = ctx_->quant_of(layer_);
  // (the layers only: the head's decoder may share its weight, and so its gradient, with the
  // embedding, whose backward runs on the compute stream)
  const ops::WeightGradsBeside beside(ctx_->grads_beside && layer_ >= 0);
  if (dout_codes) {  // (the producer added Σ dout to the bias gradient)
    if (!producer_quant()) fail("Linear::backward: gradient codes from a producer need DelayedScaling on CUDA");
    if (dout_amax.defined()) fail("Linear::backward: the producer of gradient codes records their amax itself");
    Tensor no_db;
    return backward_delayed(dx, dw, no_db, dout, x, w, *q, saved, dout_amax, dout_codes);
  }
  if (!q) return ops::linear_backward(dx, dw, db, dout, x, w);
  if (ctx_->stats) collect_stats(2, dout, *q);
  if (q->format == LayerFormat::Fp8 && q->scaling == Fp8Scaling::Current)
    return ops::linear_backward_fp8(dx, dw, db, dout, x, w, {q->fwd, q->bwd}, saved, dout_amax, codes(w));
  if (q->format == LayerFormat::Fp8 && q->scaling == Fp8Scaling::Delayed)
    return backward_delayed(dx, dw, db, dout, x, w, *q, saved, dout_amax, nullptr);
  if (q->format == LayerFormat::Fp8 && q->scaling == Fp8Scaling::Block)
    return ops::linear_backward_fp8_block(dx, dw, db, dout, x, w, block_recipe(*q), saved, codes(w));
  backward_emulated(dx, dw, db, dout, x, w, *q);
}

// ---- DelayedScaling: each tensor's amax goes into its history slot; its quantization uses the
// scale from earlier steps (scale_amax), passed where current scaling passes the tensor's amax.

namespace {
Tensor fake_quantized(const Tensor& t, ops::Fp8Type type, const Tensor& amax) {
  Tensor out = Tensor::empty(t.shape(), DType::F32, t.device());
  ops::cpu::fp8_fake_quantize(out, t, type, amax);
  return out;
}
}  // namespace

void Linear::forward_delayed(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& residual,
                             const ops::LayerQuant& q, ops::Fp8SavedInput* save, const Tensor& x_amax,
                             const ops::Fp8Codes* x_codes) const {
  Tensor hx = history_row(0), hw = history_row(1);
  if (w.device() == Device::CPU) {
    ops::fp8_amax_record(hx, x, x_amax);
    ops::fp8_amax_record(hw, w);
    return ops::linear_forward(out, fake_quantized(x, q.fwd, scale_amax(0)), fake_quantized(w, q.fwd, scale_amax(1)),
                               b, residual);
  }
  // CUDA: the weight's codes made with its delayed scale (once per optimizer step; here, unless
  // the stack made them ahead), then the FP8 GEMM takes them; the input's delayed scale goes in
  // as its "amax".
  make_weight_codes();
  ops::Fp8WeightCodes* wc = codes(w);
  const int64_t I = w.size(1);
  if (!x_codes && !x_amax.defined() && save && ops::op_options().fp8_release_inputs && takes_codes() &&
      x.dim() == 2 && x.size(1) == I && x.size(0) > 0 && aligned16(x)) {
    // No producer handed over max |x| (the attention output): the quantization of x records it
    // in its own pass, and the codes go to the GEMM as a producer's would (its saved codes then
    // replace x for backward, as fp8_release_inputs has it).
    ops::Fp8Codes own = ops::Fp8Codes::empty_for(x.size(0), I);
    ops::fp8_quantize(own.codes, own.codes_t, own.scale_inv, x, q.fwd, scale_amax(0), Tensor(), hx);
    return ops::linear_forward_fp8(out, Tensor(), w, b, residual, {q.fwd, q.bwd}, save, Tensor(), wc, &own);
  }
  if (!x_codes) ops::fp8_amax_record(hx, x, x_amax);  // (codes: their producer folded it in)
  ops::linear_forward_fp8(out, x, w, b, residual, {q.fwd, q.bwd}, save, scale_amax(0), wc, x_codes);
}

void Linear::backward_delayed(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x,
                              const Tensor& w, const ops::LayerQuant& q, const ops::Fp8SavedInput* saved,
                              const Tensor& dout_amax, const ops::Fp8Codes* dout_codes) const {
  Tensor hd = history_row(2);
  if (!dout_codes) ops::fp8_amax_record(hd, dout, dout_amax);  // (codes: their producer folded it in)
  if (w.device() == Device::CPU) {
    Tensor none;
    if (dx.defined() || dw.defined())
      ops::linear_backward(dx, dw, none, fake_quantized(dout, q.bwd, scale_amax(2)),
                           fake_quantized(x, q.fwd, scale_amax(0)), fake_quantized(w, q.fwd, scale_amax(1)));
    if (db.defined()) ops::linear_backward(none, none, db, dout, x, w);  // from the unquantized gradient
    return;
  }
  // x's transposed codes with its delayed scale when forward did not keep them (recompute).
  // (x is undefined only when saved->replaces_x: forward kept these codes.)
  ops::Fp8SavedInput own;
  const int64_t I = w.size(1);
  const int64_t N = dout_codes ? dout_codes->codes.size(0) : dout.numel() / std::max<int64_t>(w.size(0), 1);
  if (dw.defined() && (!saved || !saved->codes_t.defined()) && I % 16 == 0) {
    own.codes_t = Tensor::empty({I, (N + 15) / 16 * 16}, DType::U8, Device::CUDA);
    own.scale_inv = Tensor::empty({1}, DType::F32, Device::CUDA);
    Tensor no_rows;
    ops::fp8_quantize(no_rows, own.codes_t, own.scale_inv, x, q.fwd, scale_amax(0));
    saved = &own;
  }
  ops::linear_backward_fp8(dx, dw, db, dout, x, w, {q.fwd, q.bwd}, saved, scale_amax(2), codes(w), dout_codes);
}

// ---- MXFP8 and NVFP4, emulated (no Hopper tensor-core path): each GEMM operand quantized and
// dequantized with blocks along that GEMM's contraction dimension (a weight's 2D blocks serve
// both of its GEMMs). Float8BlockScaling runs through ops::linear_*_fp8_block instead; its CPU
// version is the same emulation.

namespace {

// How one GEMM operand of [R, C] is blocked: along C ("rows" of blocks, 1×n) or along R (n×1).
ops::BlockQuant block_spec(const ops::LayerQuant& q, bool is_weight, bool along_rows, bool gradient) {
  ops::BlockQuant b;
  const ops::Fp8Type t = gradient ? q.bwd : q.fwd;
  auto shape = [&](int n) {
    b.block_rows = along_rows ? 1 : n;
    b.block_cols = along_rows ? n : 1;
  };
  if (q.format == LayerFormat::Fp4) {
    b.kind = ops::BlockScaleKind::Nvfp4;
    if (is_weight && q.nvfp4.weight_2d) {
      b.block_rows = b.block_cols = 16;
    } else {
      shape(16);
    }
    b.stochastic = gradient && q.nvfp4.stochastic_rounding;
  } else if (q.scaling == Fp8Scaling::Mxfp8) {
    b.kind = ops::BlockScaleKind::E8M0;
    b.fp8 = t;
    shape(32);
  } else {  // Float8BlockScaling
    b = ops::float8_block_quant(t, q.block_f32_scales, is_weight, along_rows);
  }
  return b;
}

// t quantized and dequantized, in t's dtype (F32 on the CPU, BF16 on CUDA: what the GEMM reads).
Tensor block_quantized(const Tensor& t, const ops::BlockQuant& b) {
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  ops::block_fake_quantize(out, t, b);
  return out;
}

}  // namespace

void Linear::collect_stats(int role, const Tensor& t, const ops::LayerQuant& q) const {
  static const char* const kProj[] = {"qkv", "out", "mlp_in", "mlp_out"};
  static const char* const kRole[] = {"input", "weight", "grad"};
  char name[64];
  std::snprintf(name, sizeof name, "layer_%02d/%s/%s", layer_ + 1, kProj[proj_ & 3], kRole[role]);
  const ops::Fp8Type type = role == 2 ? q.bwd : q.fwd;
  if (q.format == LayerFormat::Fp8 && q.scaling == Fp8Scaling::Current) {
    ctx_->stats->add(name, ops::fp8_tensor_stats(t, type, -1.0f));
  } else if (q.format == LayerFormat::Fp8 && q.scaling == Fp8Scaling::Delayed) {
    ctx_->stats->add(name, ops::fp8_tensor_stats(t, type, scale_amax(role).to(Device::CPU).f32()[0]));
  } else {  // block-scaled (CPU): as the first GEMM that reads the tensor sees it
    const ops::BlockQuant spec = role == 2 ? block_spec(q, false, true, true) : block_spec(q, role == 1, true, false);
    ctx_->stats->add(name, ops::block_tensor_stats(t, block_quantized(t, spec)));
  }
}

void Linear::forward_emulated(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& residual,
                              const ops::LayerQuant& q) const {
  ops::linear_forward(out, block_quantized(x, block_spec(q, false, true, false)),
                      block_quantized(w, block_spec(q, true, true, false)), b, residual);
}

void Linear::backward_emulated(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x,
                               const Tensor& w, const ops::LayerQuant& q) const {
  Tensor none;
  const uint64_t call = calls_++;
  auto grad_spec = [&](bool along_rows, uint64_t stream) {
    ops::BlockQuant s = block_spec(q, false, along_rows, true);
    s.seed = (uint64_t(layer_) << 8 | uint64_t(proj_)) ^ 0x9E3779B97F4A7C15ull;
    s.stream = call * 2 + stream;
    return s;
  };
  if (dx.defined())  // dx = dout·w: contraction over the output features
    ops::linear_backward(dx, none, none, block_quantized(dout, grad_spec(true, 0)), x,
                         block_quantized(w, block_spec(q, true, false, false)));
  if (dw.defined()) {  // dw += doutᵀ·x: contraction over the tokens
    Tensor d = dout, xx = x;
    const int64_t N = x.numel() / x.size(-1);
    if (q.format == LayerFormat::Fp4 && q.nvfp4.random_hadamard) {
      // The transform mixes groups of 16 token rows; a batch of other lengths gets zero rows
      // up to a multiple of 16 (non-zero once mixed, but dw's exact product is unchanged: the
      // transform is orthogonal per group).
      const uint64_t seed = 0x7E11A5EEDull + uint64_t(layer_ * 4 + proj_);
      const int64_t Np = (N + 15) / 16 * 16;
      auto transformed = [&](const Tensor& t) {
        const int64_t C = t.size(-1);
        Tensor in = t.view({N, C});
        if (Np != N) {
          in = Tensor::zeros({Np, C}, t.dtype(), t.device());
          Tensor rows = in.flat_slice(0, {N, C});
          ops::cast(rows, t.view({N, C}));
        }
        Tensor out = Tensor::empty({Np, C}, t.dtype(), t.device());
        ops::hadamard16_rows(out, in, seed);
        return out;
      };
      d = transformed(dout);
      xx = transformed(x);
    }
    ops::linear_backward(none, dw, none, block_quantized(d, grad_spec(false, 1)),
                         block_quantized(xx, block_spec(q, false, false, false)), w);
  }
  if (db.defined()) ops::linear_backward(none, none, db, dout, x, w);  // from the unquantized gradient
}

}  // namespace biofm
