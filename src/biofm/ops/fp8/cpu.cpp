// FP8 format and quantization, CPU reference.
#include <cmath>
#include <limits>

#include "biofm/ops/activation/op.h"
#include "biofm/ops/cpu_util.h"
#include "biofm/ops/fp8/delayed.h"
#include "biofm/ops/fp8/op.h"

namespace biofm::ops {

namespace {

struct Fp8Format {
  int mantissa_bits;  // stored fraction bits
  int min_exponent;   // exponent of the smallest normal value (below: subnormals)
  int bias;
  float max;
};

Fp8Format format_of(Fp8Type t) {
  return t == Fp8Type::E4M3 ? Fp8Format{3, -6, 7, 448.0f} : Fp8Format{2, -14, 15, 57344.0f};
}

}  // namespace

const char* fp8_type_name(Fp8Type t) { return t == Fp8Type::E4M3 ? "E4M3" : "E5M2"; }

float fp8_max(Fp8Type t) { return format_of(t).max; }

float fp8_overflow_bound(Fp8Type t) {
  const Fp8Format f = format_of(t);
  return f.max + std::ldexp(1.0f, std::ilogb(f.max) - f.mantissa_bits) / 2;
}

float fp8_round(float v, Fp8Type t) {
  if (!std::isfinite(v)) return std::numeric_limits<float>::quiet_NaN();  // an overflow is not clamped
  const Fp8Format f = format_of(t);
  const float a = std::fabs(v);
  if (a >= f.max) return std::copysign(f.max, v);
  if (a == 0.0f) return v;
  int e2 = 0;
  std::frexp(a, &e2);  // a = m·2^e2 with m in [0.5, 1): the leading bit is 2^(e2-1)
  const int e = std::max(e2 - 1, f.min_exponent);
  const float quantum = std::ldexp(1.0f, e - f.mantissa_bits);
  // nearbyint rounds ties to even in the default rounding mode; a carry into the next
  // binade is exact, and anything rounded past max saturates.
  const float r = std::nearbyint(a / quantum) * quantum;
  return std::copysign(std::min(r, f.max), v);
}

uint8_t fp8_encode(float v, Fp8Type t) {
  if (!std::isfinite(v)) return 0x7f;  // a NaN code in both formats
  const Fp8Format f = format_of(t);
  const float r = fp8_round(v, t);
  const uint8_t sign = std::signbit(r) ? 0x80 : 0x00;
  const float a = std::fabs(r);
  if (a == 0.0f) return sign;
  int e2 = 0;
  std::frexp(a, &e2);
  const int e = e2 - 1;
  if (e < f.min_exponent)  // subnormal: exponent field 0, fraction in units of the quantum
    return uint8_t(sign | int(a / std::ldexp(1.0f, f.min_exponent - f.mantissa_bits)));
  const int frac = int((a / std::ldexp(1.0f, e) - 1.0f) * float(1 << f.mantissa_bits));
  return uint8_t(sign | ((e + f.bias) << f.mantissa_bits) | frac);
}

float fp8_decode(uint8_t code, Fp8Type t) {
  const Fp8Format f = format_of(t);
  const int exp_bits = 7 - f.mantissa_bits;
  const int exp_field = (code >> f.mantissa_bits) & ((1 << exp_bits) - 1);
  const int frac = code & ((1 << f.mantissa_bits) - 1);
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const bool all_ones = exp_field == (1 << exp_bits) - 1;
  if (t == Fp8Type::E4M3 ? (all_ones && frac == 7) : (all_ones && frac != 0))
    return std::numeric_limits<float>::quiet_NaN();
  if (t == Fp8Type::E5M2 && all_ones) return sign * std::numeric_limits<float>::infinity();
  if (exp_field == 0) return sign * std::ldexp(float(frac), f.min_exponent - f.mantissa_bits);
  return sign * std::ldexp(1.0f + float(frac) / float(1 << f.mantissa_bits), exp_field - f.bias);
}

float fp8_scale_for(float amax, Fp8Type t) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  const float s = fp8_max(t) / amax;
  return std::isfinite(s) ? s : std::numeric_limits<float>::max();
}

namespace cpu {
using namespace cpu_detail;

namespace {

// x as fp32 values (a copy when BF16).
std::vector<float> values_of(const Tensor& x, const char* op) {
  if (!x.defined() || x.device() != Device::CPU) fail(op, ": x must be a CPU tensor");
  const int64_t n = x.numel();
  std::vector<float> v(static_cast<size_t>(n));
  if (x.dtype() == DType::F32) {
    std::copy(x.f32(), x.f32() + n, v.begin());
  } else if (x.dtype() == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = bf16_to_f32(x.bf()[i]);
  } else {
    fail(op, ": x must be F32 or BF16, got ", x.describe());
  }
  return v;
}

float amax_of(const std::vector<float>& v) { return max_abs(v.data(), int64_t(v.size())); }

}  // namespace

void fp8_quantize(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& x, Fp8Type t, const Tensor& amax,
                  const Tensor& col_sums, const Tensor& record) {
  const char* op = "fp8_quantize";
  const std::vector<float> v = values_of(x, op);
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = rows_of(x, C, op, "x");
  require_f32_shape(scale_inv, {1}, op, "scale_inv");
  if (amax.defined()) require_f32_shape(amax, {1}, op, "amax");
  if (col_sums.defined()) require_f32_shape(col_sums, {C}, op, "col_sums");
  if (record.defined()) {
    require_f32(record, op, "record");
    if (record.numel() < 1) fail(op, ": record must be a history row, got ", record.describe());
  }
  if (q.defined()) {  // (every check before anything is written)
    require(q, DType::U8, op, "q");
    if (q.numel() != R * C) fail(op, ": q ", q.describe(), " must hold x ", x.describe());
  }
  if (q_t.defined()) {
    require(q_t, DType::U8, op, "q_t");
    if (q_t.dim() != 2 || q_t.size(0) != C || q_t.size(1) < R || q_t.size(1) % 16)
      fail(op, ": q_t must be [", C, ", Rp] with Rp >= ", R, " a multiple of 16, got ", q_t.describe());
  }
  const float scale = fp8_scale_for(amax.defined() ? amax.f32()[0] : amax_of(v), t);
  scale_inv.f32()[0] = 1.0f / scale;
  if (q.defined()) {
    uint8_t* p = static_cast<uint8_t*>(q.raw());
#pragma omp parallel for schedule(static) num_threads(threads_for(R * C))
    for (int64_t i = 0; i < R * C; ++i) p[i] = fp8_encode(v[size_t(i)] * scale, t);
  }
  if (q_t.defined()) {
    const int64_t Rp = q_t.size(1);
    uint8_t* p = static_cast<uint8_t*>(q_t.raw());
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < Rp; ++r) p[c * Rp + r] = r < R ? fp8_encode(v[size_t(r * C + c)] * scale, t) : 0;
  }
  if (col_sums.defined()) {
    float* s = col_sums.f32();
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0;
      for (int64_t r = 0; r < R; ++r) acc += v[size_t(r * C + c)];
      s[c] += float(acc);
    }
  }
  if (record.defined()) {
    Tensor row = record;
    cpu::fp8_amax_record(row, x, Tensor());
  }
}

// The reference: the GELU op (which rounds src to pre's dtype and reduces its amax, then folded
// into record), then fp8_quantize of what it stored.
void fp8_quantize_gelu(Tensor& q, Tensor& q_t, Tensor& scale_inv, const Tensor& pre, const Tensor& dact, Fp8Type t,
                       const Tensor& amax, const Tensor& record, const Tensor& col_sums) {
  const char* op = "fp8_quantize_gelu";
  if (!amax.defined() || !record.defined()) fail(op, ": amax (the delayed scale) and record are required");
  require_f32(record, op, "record");
  if (record.numel() < 1) fail(op, ": record must be a history row, got ", record.describe());
  if (dact.defined() && dact.shape() != pre.shape())
    fail(op, ": dact ", dact.describe(), " must match pre ", pre.describe());
  Tensor src = Tensor::empty(pre.shape(), pre.dtype(), Device::CPU), seen = Tensor::empty({1}, DType::F32);
  if (dact.defined())
    cpu::gelu_backward(src, dact, pre, GeluKind::Erf, seen);
  else
    cpu::gelu_forward(src, pre, GeluKind::Erf, seen);
  Tensor row = record;
  cpu::fp8_amax_record(row, Tensor(), seen);
  cpu::fp8_quantize(q, q_t, scale_inv, src, t, amax, col_sums, Tensor());
}

namespace {
// x[r, c] = decode(codes[r·row_stride + c·col_stride]) · scale_inv: both ways back share it.
void dequantize_strided(Tensor& x, const uint8_t* codes, int64_t row_stride, int64_t col_stride,
                        const Tensor& scale_inv, Fp8Type t) {
  const int64_t R = x.size(0), C = x.size(1);
  const float inv = scale_inv.f32()[0];
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float v = fp8_decode(codes[r * row_stride + c * col_stride], t) * inv;
      if (x.dtype() == DType::F32)
        x.f32()[r * C + c] = v;
      else
        x.bf()[r * C + c] = f32_to_bf16(v);
    }
}
}  // namespace

void fp8_dequantize_transposed(Tensor& x, const Tensor& q_t, const Tensor& scale_inv, Fp8Type t) {
  const char* op = "fp8_dequantize_transposed";
  if (x.dtype() != DType::F32 && x.dtype() != DType::BF16) fail(op, ": x must be F32 or BF16, got ", x.describe());
  if (x.dim() != 2) fail(op, ": x must be [R, C], got ", x.describe());
  const int64_t R = x.size(0), C = x.size(1);
  require(q_t, DType::U8, op, "q_t");
  if (q_t.dim() != 2 || q_t.size(0) != C || q_t.size(1) < R)
    fail(op, ": q_t must be [", C, ", Rp] with Rp >= ", R, ", got ", q_t.describe());
  require_f32_shape(scale_inv, {1}, op, "scale_inv");
  dequantize_strided(x, static_cast<const uint8_t*>(q_t.raw()), 1, q_t.size(1), scale_inv, t);
}

void fp8_dequantize(Tensor& x, const Tensor& q, const Tensor& scale_inv, Fp8Type t) {
  const char* op = "fp8_dequantize";
  if (x.dtype() != DType::F32 && x.dtype() != DType::BF16) fail(op, ": x must be F32 or BF16, got ", x.describe());
  if (x.dim() != 2) fail(op, ": x must be [R, C], got ", x.describe());
  require(q, DType::U8, op, "q");
  if (q.shape() != x.shape()) fail(op, ": q must be shaped like x ", x.describe(), ", got ", q.describe());
  require_f32_shape(scale_inv, {1}, op, "scale_inv");
  dequantize_strided(x, static_cast<const uint8_t*>(q.raw()), x.size(1), 1, scale_inv, t);
}

void fp8_fake_quantize(Tensor& out, const Tensor& x, Fp8Type t, const Tensor& amax) {
  const char* op = "fp8_fake_quantize";
  const std::vector<float> v = values_of(x, op);
  require_f32(out, op, "out");
  if (out.numel() != x.numel()) fail(op, ": out ", out.describe(), " must match x ", x.describe());
  if (amax.defined()) require_f32_shape(amax, {1}, op, "amax");
  const float scale = fp8_scale_for(amax.defined() ? amax.f32()[0] : amax_of(v), t);
  const float inv = 1.0f / scale;  // as the GPU applies it: code · scale_inv
  float* o = out.f32();
  const int64_t n = int64_t(v.size());
#pragma omp parallel for schedule(static) num_threads(threads_for(n))
  for (int64_t i = 0; i < n; ++i) o[i] = fp8_round(v[size_t(i)] * scale, t) * inv;
}

}  // namespace cpu
}  // namespace biofm::ops
