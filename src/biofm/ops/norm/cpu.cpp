// LayerNorm and RMSNorm over the last dimension, CPU (statistics in double).
#include <cmath>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/fp8/delayed.h"
#include "biofm/ops/norm/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b, float eps, const Tensor& out_amax) {
  const char* op = "layernorm_forward";
  require_f32(x, op, "x");
  require_f32(w, op, "w");
  require_f32(out, op, "out");
  if (w.dim() != 1) fail(op, ": w must be [C], got ", w.describe());
  const int64_t C = w.size(0);
  const int64_t N = rows_of(x, C, op, "x");
  if (out.shape() != x.shape()) fail(op, ": out ", out.describe(), " must match x ", x.describe());
  if (b.defined()) require_f32_shape(b, {C}, op, "b");
  if (mean.defined()) require_f32_shape(mean, {N}, op, "mean");
  if (rstd.defined()) require_f32_shape(rstd, {N}, op, "rstd");
  const float* xp = x.f32();
  const float* wp = w.f32();
  const float* bp = b.defined() ? b.f32() : nullptr;
  float* yp = out.f32();
  float* mp = mean.defined() ? mean.f32() : nullptr;
  float* rp = rstd.defined() ? rstd.f32() : nullptr;
#pragma omp parallel for schedule(static) num_threads(threads_for(N * C))
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = xp + n * C;
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += xr[c];
    const double mu = C ? s / double(C) : 0.0;
    double v = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double d = xr[c] - mu;
      v += d * d;
    }
    const double var = C ? v / double(C) : 0.0;  // biased, as torch
    const float r = float(1.0 / std::sqrt(var + double(eps)));
    const float m = float(mu);
    float* yr = yp + n * C;
    for (int64_t c = 0; c < C; ++c) {
      const float xh = (xr[c] - m) * r;
      yr[c] = xh * wp[c] + (bp ? bp[c] : 0.0f);
    }
    if (mp) mp[n] = m;
    if (rp) rp[n] = r;
  }
  write_amax(out_amax, out, op);
}

namespace {
struct BackwardArgs {
  int64_t N, C;
  const float* rres;  // the residual gradient added to dx, or null
};

// The checks both backward passes share (before anything is written): x, w, dout, rstd, dx and
// its optional residual gradient and amax, dw.
BackwardArgs check_backward(const char* op, const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                            const Tensor& w, const Tensor& rstd, const Tensor& dres, const Tensor& dx_amax) {
  if (dx_amax.defined() && !dx.defined()) fail(op, ": dx_amax given without dx");
  if (dx_amax.defined()) require_f32_shape(dx_amax, {1}, op, "dx_amax");
  require_f32(x, op, "x");
  require_f32(w, op, "w");
  require_f32(dout, op, "dout");
  if (w.dim() != 1) fail(op, ": w must be [C], got ", w.describe());
  const int64_t C = w.size(0);
  const int64_t N = rows_of(x, C, op, "x");
  if (dout.shape() != x.shape()) fail(op, ": dout ", dout.describe(), " must match x ", x.describe());
  require_f32_shape(rstd, {N}, op, "rstd");
  if (dx.defined()) {
    require_f32(dx, op, "dx");
    if (dx.shape() != x.shape()) fail(op, ": dx ", dx.describe(), " must match x ", x.describe());
  }
  if (dw.defined()) require_f32_shape(dw, {C}, op, "dw");
  const float* rres = nullptr;
  if (dres.defined()) {
    require_f32(dres, op, "dres");
    if (!dx.defined()) fail(op, ": dres given without dx");
    if (dres.shape() != x.shape()) fail(op, ": dres ", dres.describe(), " must match x ", x.describe());
    rres = dres.f32();
  }
  return {N, C, rres};
}
}  // namespace

void layernorm_backward(Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, const Tensor& dres,
                        const Tensor& dx_amax) {
  const char* op = "layernorm_backward";
  const BackwardArgs args = check_backward(op, dx, dw, dout, x, w, rstd, dres, dx_amax);
  const int64_t N = args.N, C = args.C;  // (plain locals: OpenMP regions below capture them)
  const float* rres = args.rres;
  require_f32_shape(mean, {N}, op, "mean");
  if (db.defined()) require_f32_shape(db, {C}, op, "db");
  const float* xp = x.f32();
  const float* wp = w.f32();
  const float* gp = dout.f32();
  const float* mp = mean.f32();
  const float* rp = rstd.f32();
  float* dxp = dx.defined() ? dx.f32() : nullptr;
  const bool want_w = dw.defined(), want_b = db.defined();
  const int nt = threads_for(N * C);
  ThreadPartials pw(want_w ? nt : 0, C), pb(want_b ? nt : 0, C);
#pragma omp parallel num_threads(nt)
  {
    const int t = thread_id();
    double* aw = want_w ? pw.row(t) : nullptr;
    double* ab = want_b ? pb.row(t) : nullptr;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = xp + n * C;
      const float* gr = gp + n * C;
      const float m = mp[n], r = rp[n];
      // dxhat = dout·w; dx = r·(dxhat - mean(dxhat) - xhat·mean(dxhat·xhat)).
      double s1 = 0, s2 = 0;
      for (int64_t c = 0; c < C; ++c) {
        const float xh = (xr[c] - m) * r;
        const float dxh = gr[c] * wp[c];
        s1 += dxh;
        s2 += double(dxh) * xh;
        if (aw) aw[c] += double(gr[c]) * xh;
        if (ab) ab[c] += gr[c];
      }
      if (dxp) {
        const float a1 = C ? float(s1 / double(C)) : 0.0f, a2 = C ? float(s2 / double(C)) : 0.0f;
        float* dr = dxp + n * C;  // may alias dout: each element is read before it is written
        for (int64_t c = 0; c < C; ++c) {
          const float xh = (xr[c] - m) * r;
          dr[c] = r * (gr[c] * wp[c] - a1 - xh * a2) + (rres ? rres[n * C + c] : 0.0f);
        }
      }
    }
  }
  if (want_w) pw.add_to(dw.f32());
  if (want_b) pb.add_to(db.f32());
  if (dx_amax.defined()) write_amax(dx_amax, dx, op);
}

void rmsnorm_forward(Tensor& out, Tensor& rstd, const Tensor& x, const Tensor& w, float eps, const Tensor& out_amax) {
  const char* op = "rmsnorm_forward";
  require_f32(x, op, "x");
  require_f32(w, op, "w");
  require_f32(out, op, "out");
  if (w.dim() != 1) fail(op, ": w must be [C], got ", w.describe());
  const int64_t C = w.size(0);
  const int64_t N = rows_of(x, C, op, "x");
  if (out.shape() != x.shape()) fail(op, ": out ", out.describe(), " must match x ", x.describe());
  if (rstd.defined()) require_f32_shape(rstd, {N}, op, "rstd");
  const float* xp = x.f32();
  const float* wp = w.f32();
  float* yp = out.f32();
  float* rp = rstd.defined() ? rstd.f32() : nullptr;
#pragma omp parallel for schedule(static) num_threads(threads_for(N * C))
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = xp + n * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += double(xr[c]) * xr[c];
    const float r = float(1.0 / std::sqrt((C ? ss / double(C) : 0.0) + double(eps)));
    float* yr = yp + n * C;
    for (int64_t c = 0; c < C; ++c) yr[c] = wp[c] * (xr[c] * r);
    if (rp) rp[n] = r;
  }
  write_amax(out_amax, out, op);
}

void rmsnorm_backward(Tensor& dx, Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, const Tensor& dres, const Tensor& dx_amax) {
  const char* op = "rmsnorm_backward";
  const BackwardArgs args = check_backward(op, dx, dw, dout, x, w, rstd, dres, dx_amax);
  const int64_t N = args.N, C = args.C;  // (plain locals: OpenMP regions below capture them)
  const float* rres = args.rres;
  const float* xp = x.f32();
  const float* wp = w.f32();
  const float* gp = dout.f32();
  const float* rp = rstd.f32();
  float* dxp = dx.defined() ? dx.f32() : nullptr;
  const bool want_w = dw.defined();
  const int nt = threads_for(N * C);
  ThreadPartials pw(want_w ? nt : 0, C);
#pragma omp parallel num_threads(nt)
  {
    double* aw = want_w ? pw.row(thread_id()) : nullptr;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = xp + n * C;
      const float* gr = gp + n * C;
      const float r = rp[n];
      // y = w·x·r, r = (mean(x²)+eps)^-1/2: dx = r·(dout·w) - x·r³·mean(dout·w·x).
      double s = 0;
      for (int64_t c = 0; c < C; ++c) {
        s += double(gr[c]) * wp[c] * xr[c];
        if (aw) aw[c] += double(gr[c]) * (xr[c] * r);
      }
      if (dxp) {
        const float k = C ? float(s / double(C)) * r * r * r : 0.0f;
        float* dr = dxp + n * C;
        for (int64_t c = 0; c < C; ++c)
          dr[c] = r * (gr[c] * wp[c]) - xr[c] * k + (rres ? rres[n * C + c] : 0.0f);
      }
    }
  }
  if (want_w) pw.add_to(dw.f32());
  if (dx_amax.defined()) write_amax(dx_amax, dx, op);
}

namespace {
// The FP8-output forwards: the bf16 (or f32) op's output as stored, then fp8_quantize with the
// delayed scale; record's slot 0 is max-folded with the op's max |out| as stored. Everything is
// checked before anything is written.
void check_fp8_outputs(const Tensor& q, const Tensor& q_t, const Tensor& scale_inv, const Tensor& x,
                       const Tensor& amax, const Tensor& record, const char* op) {
  if (!amax.defined() || !record.defined()) fail(op, ": amax (the delayed scale) and record are required");
  require_f32_shape(amax, {1}, op, "amax");
  require(record, DType::F32, op, "record");
  if (record.numel() < 1) fail(op, ": record must be a history row, got ", record.describe());
  require_f32_shape(scale_inv, {1}, op, "scale_inv");
  if (record.raw() == amax.raw()) fail(op, ": record must not be the delayed scale's amax");
  if (x.dim() != 2) fail(op, ": x must be [N, C], got ", x.describe());
  const int64_t N = x.size(0), C = x.size(1);
  require(q, DType::U8, op, "q");
  if (q.shape() != Shape{N, C}) fail(op, ": q must be [", N, ", ", C, "], got ", q.describe());
  if (q_t.defined()) {
    require(q_t, DType::U8, op, "q_t");
    if (q_t.dim() != 2 || q_t.size(0) != C || q_t.size(1) < N || q_t.size(1) % 16 != 0)
      fail(op, ": q_t must be [", C, ", Np] with Np >= ", N, " a multiple of 16, got ", q_t.describe());
  }
}

// The op's output (its max |out| folded into record), then its codes.
template <class Norm>
void norm_then_codes(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& x, Fp8Type t, const Tensor& amax,
                     const Tensor& record, Norm norm) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), Device::CPU), seen = Tensor::empty({1}, DType::F32);
  norm(out, seen);
  Tensor row = record;
  cpu::fp8_amax_record(row, Tensor(), seen);
  cpu::fp8_quantize(q, q_t, scale_inv, out, t, amax, Tensor(), Tensor());
}
}  // namespace

void layernorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& mean, Tensor& rstd, const Tensor& x,
                           const Tensor& w, const Tensor& b, float eps, Fp8Type t, const Tensor& amax,
                           const Tensor& record) {
  check_fp8_outputs(q, q_t, scale_inv, x, amax, record, "layernorm_forward_fp8");
  norm_then_codes(q, q_t, scale_inv, x, t, amax, record,
                  [&](Tensor& out, const Tensor& seen) { layernorm_forward(out, mean, rstd, x, w, b, eps, seen); });
}

void rmsnorm_forward_fp8(Tensor& q, Tensor& q_t, Tensor& scale_inv, Tensor& rstd, const Tensor& x, const Tensor& w,
                         float eps, Fp8Type t, const Tensor& amax, const Tensor& record) {
  check_fp8_outputs(q, q_t, scale_inv, x, amax, record, "rmsnorm_forward_fp8");
  norm_then_codes(q, q_t, scale_inv, x, t, amax, record,
                  [&](Tensor& out, const Tensor& seen) { rmsnorm_forward(out, rstd, x, w, eps, seen); });
}

}  // namespace biofm::ops::cpu
