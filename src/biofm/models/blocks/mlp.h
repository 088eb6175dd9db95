// Mlp: out = residual + W_out·act(W_in·xn) (+ biases), act = exact GELU on [T, F] (ESM-2) or
// SwiGLU on the packed gate|up rows [T, 2F] of one GEMM (Llama). In the compute precision the
// GELU runs inside the GEMMs (ops::linear_gelu_forward / linear_dgelu_backward); under FP8
// DelayedScaling it runs inside the quantization of the next GEMM's operand instead.
#pragma once
#include "biofm/models/blocks/linear.h"

namespace biofm {

enum class MlpKind { Gelu, SwiGLU };

struct MlpActs {
  Tensor pre;       // W_in·xn: [T, F] (GELU) or [T, 2F] gate | up (SwiGLU)
  Tensor act;       // act(pre) [T, F]: what W_out reads
  Tensor act_amax;  // FP8: max |act| from the kernel that wrote it (GELU or SwiGLU)
  bool keep_pre = true;  // false (inference): forward need not store pre where it can avoid it
  ops::Fp8SavedInput fp8_in, fp8_out;
};

class Mlp {
 public:
  Mlp() = default;
  Mlp(const BlockContext* ctx, MlpKind kind, Linear in, Linear out)
      : ctx_(ctx), kind_(kind), in_(std::move(in)), out_(std::move(out)) {}

  // Runs W_in and the activation; then, when out is given, out = residual + W_out·act (null:
  // the output is not wanted — a recomputed layer skips the last GEMM).
  // xn_codes: xn exists only as the FP8 codes its norm made for W_in (pass an undefined xn;
  // W_in.takes_codes() only).
  void forward(Tensor* out, const Tensor& xn, const Tensor& residual, MlpActs& a, bool keep_fp8,
               const Tensor& xn_amax, const ops::Fp8Codes* xn_codes = nullptr) const;
  // act from pre again (a lean layer drops act and redoes it in backward).
  void activate(MlpActs& a) const;
  // dxn overwritten; parameter gradients accumulate. dout_amax: max |dout| from its producer
  // (FP8: W_out's gradient quantization reuses it), or undefined.
  void backward(Tensor& dxn, const Tensor& dout, const Tensor& xn, MlpActs& a,
                const Tensor& dout_amax = Tensor()) const;
  // Whether W_out quantizes its output gradient with per-tensor scales (then the producer of
  // that gradient saves it a pass by passing its amax).
  bool out_fp8() const { return out_.fp8(); }
  const Linear& in() const { return in_; }
  const Linear& out() const { return out_; }

 private:
  // GELU with both linears in the compute precision and W_in's bias present: the fused ops.
  bool fused_gelu() const { return kind_ == MlpKind::Gelu && in_.plain() && out_.plain() && in_.bias().defined(); }
  // GELU with both linears under DelayedScaling on CUDA: the GELU (forward) and its gradient
  // (backward) write the next GEMM's FP8 codes themselves (ops::fp8_quantize_gelu).
  bool gelu_writes_codes() const;
  const BlockContext* ctx_ = nullptr;
  MlpKind kind_ = MlpKind::Gelu;
  Linear in_, out_;
};

}  // namespace biofm
