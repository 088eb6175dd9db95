// Block-scaled numerics (Float8BlockScaling, MXFP8, NVFP4), CPU reference; definitions in op.h.
#include <cmath>
#include <limits>
#include <vector>

#include "biofm/core/rng.h"
#include "biofm/ops/blockscale/op.h"
#include "biofm/ops/cpu_util.h"

namespace biofm::ops {

namespace {
constexpr float kE2m1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};  // by code & 7
constexpr float kE2m1Max = 6.0f;
}  // namespace

void e2m1_neighbours(float v, float& lo, float& hi) {
  const float a = std::fabs(v);
  float l = kE2m1Max, h = kE2m1Max;
  for (int i = 0; i < 8; ++i)
    if (kE2m1Values[i] >= a) {
      h = kE2m1Values[i];
      l = (kE2m1Values[i] == a || i == 0) ? h : kE2m1Values[i - 1];
      break;
    }
  if (v < 0) {
    lo = -h;
    hi = -l;
  } else {
    lo = l;
    hi = h;
  }
}

float e2m1_round(float v) {
  if (std::isnan(v)) return v;
  const float a = std::fabs(v);
  if (a >= kE2m1Max) return std::copysign(kE2m1Max, v);
  int best = 0;
  for (int i = 1; i < 8; ++i) {
    const float d = std::fabs(kE2m1Values[i] - a), db = std::fabs(kE2m1Values[best] - a);
    if (d < db || (d == db && (i & 1) == 0)) best = i;  // ties to the even mantissa (even code)
  }
  return std::copysign(kE2m1Values[best], v);
}

uint8_t e2m1_encode(float v) {
  const float r = e2m1_round(v);
  const float a = std::fabs(r);
  uint8_t code = 0;
  for (uint8_t i = 0; i < 8; ++i)
    if (kE2m1Values[i] == a) code = i;
  return uint8_t((std::signbit(r) ? 0x8 : 0x0) | code);
}

float e2m1_decode(uint8_t code) {
  const float a = kE2m1Values[code & 7];
  return (code & 0x8) ? -a : a;
}

float e8m0_decode(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(code) - 127);
}

uint8_t e8m0_round_up(float v) {
  if (std::isnan(v)) return 0xFF;
  if (!(v > 0.0f)) return 0;
  if (std::isinf(v)) return 254;
  int e = 0;
  const float m = std::frexp(v, &e);  // v = m·2^e, m in [0.5, 1)
  int p = (m == 0.5f) ? e - 1 : e;    // smallest p with 2^p >= v
  p = std::max(-127, std::min(127, p));
  return uint8_t(p + 127);
}

void hadamard16_signs(uint64_t seed, float signs[16]) {
  for (int i = 0; i < 16; ++i) signs[i] = (rng_block(seed, RngStream(0x4AD), 0, uint32_t(i))[0] & 1) ? -1.0f : 1.0f;
}

BlockQuant float8_block_quant(Fp8Type t, bool f32_scales, bool weight, bool along_cols) {
  BlockQuant b;
  b.kind = f32_scales ? BlockScaleKind::F32 : BlockScaleKind::F32Pow2;
  b.fp8 = t;
  b.block_rows = weight || !along_cols ? 128 : 1;
  b.block_cols = weight || along_cols ? 128 : 1;
  return b;
}

float stochastic_uniform(uint64_t seed, uint64_t stream, uint32_t i) {
  return rng_uniform(seed, RngStream(0x5F4), stream, i);
}

namespace cpu {
using namespace cpu_detail;

namespace {

float scale_f32(float amax, float elem_max, bool pow2) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  float s = elem_max / amax;
  if (!std::isfinite(s)) s = std::numeric_limits<float>::max();
  if (pow2) {
    int e = 0;
    std::frexp(s, &e);  // s in [2^(e-1), 2^e)
    s = std::ldexp(1.0f, e - 1);
  }
  return s;
}

// x rounded to E2M1 stochastically: up with probability (|x| - lo) / (hi - lo).
float e2m1_stochastic(float v, float u) {
  if (std::isnan(v)) return v;
  float lo, hi;
  e2m1_neighbours(v, lo, hi);
  if (lo == hi) return lo;
  const float p_hi = (v - lo) / (hi - lo);
  return u < p_hi ? hi : lo;
}

// x (F32 or BF16, CPU) as floats.
std::vector<float> float_values(const Tensor& x, const char* op) {
  if (!x.defined() || x.device() != Device::CPU) fail(op, ": x must be a CPU tensor");
  std::vector<float> v(size_t(x.numel()));
  if (x.dtype() == DType::F32)
    std::copy(x.f32(), x.f32() + x.numel(), v.begin());
  else if (x.dtype() == DType::BF16)
    for (int64_t i = 0; i < x.numel(); ++i) v[size_t(i)] = bf16_to_f32(x.bf()[i]);
  else
    fail(op, ": x must be F32 or BF16, got ", x.describe());
  return v;
}

}  // namespace

void block_fake_quantize(Tensor& out, const Tensor& x, const BlockQuant& q) {
  const char* op = "block_fake_quantize";
  require_f32(out, op, "out");
  if (out.numel() != x.numel()) fail(op, ": out ", out.describe(), " must match x ", x.describe());
  if (q.block_rows < 1 || q.block_cols < 1) fail(op, ": block sizes must be positive");
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = C ? x.numel() / C : 0;
  const std::vector<float> v = float_values(x, op);
  float tensor_enc = 1.0f;  // NVFP4's S_enc
  if (q.kind == BlockScaleKind::Nvfp4) {
    float amax = 0.0f;
    for (float a : v) amax = std::max(amax, std::fabs(a));
    tensor_enc = scale_f32(amax, fp8_max(Fp8Type::E4M3) * kE2m1Max, false);
  }
  const float elem_max = q.kind == BlockScaleKind::Nvfp4 ? kE2m1Max : fp8_max(q.fp8);
  float* o = out.f32();
  for (int64_t r0 = 0; r0 < R; r0 += q.block_rows)
    for (int64_t c0 = 0; c0 < C; c0 += q.block_cols) {
      const int64_t r1 = std::min(R, r0 + q.block_rows), c1 = std::min(C, c0 + q.block_cols);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(v[size_t(r * C + c)]));
      float enc = 1.0f, dec = 1.0f;  // element = round(x·enc), x̂ = element·dec
      switch (q.kind) {
        case BlockScaleKind::F32:
        case BlockScaleKind::F32Pow2:
          enc = scale_f32(amax, elem_max, q.kind == BlockScaleKind::F32Pow2);
          dec = 1.0f / enc;
          break;
        case BlockScaleKind::E8M0:
          dec = e8m0_decode(e8m0_round_up(amax / elem_max));
          enc = 1.0f / dec;  // a power of two: exact
          break;
        case BlockScaleKind::Nvfp4: {
          const float sb = fp8_round(amax / kE2m1Max * tensor_enc, Fp8Type::E4M3);
          enc = sb > 0.0f ? tensor_enc / sb : 0.0f;
          dec = sb / tensor_enc;
          break;
        }
      }
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t i = r * C + c;
          const float s = v[size_t(i)] * enc;
          float e;
          if (q.kind != BlockScaleKind::Nvfp4) {
            e = fp8_round(s, q.fp8);
          } else if (q.stochastic) {
            e = e2m1_stochastic(std::max(-kE2m1Max, std::min(kE2m1Max, s)),
                                stochastic_uniform(q.seed, q.stream, uint32_t(i)));
          } else {
            e = e2m1_round(s);
          }
          o[i] = e * dec;
        }
    }
}

void fp8_block_quantize(Fp8BlockCodes* rows, Fp8BlockCodes* cols, const Tensor& x, Fp8Type t, bool pow2_scales,
                        bool weight_2d) {
  const char* op = "fp8_block_quantize";
  const std::vector<float> v = float_values(x, op);
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = C ? x.numel() / C : 0;
  if (C % 128) fail(op, ": x needs a multiple of 128 columns, got ", x.describe());
  if (weight_2d && R % 128) fail(op, ": 128x128 blocks need a multiple of 128 rows, got ", x.describe());
  const int64_t Rp = (R + 127) / 128 * 128, KB = C / 128, RB = Rp / 128;
  const float elem_max = fp8_max(t);
  auto enc_of = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {  // of the block [r0, r1) x [c0, c1)
    float m = 0.0f;
    for (int64_t r = r0; r < std::min(r1, R); ++r)
      for (int64_t c = c0; c < c1; ++c) m = std::max(m, std::fabs(v[size_t(r * C + c)]));
    return scale_f32(m, elem_max, pow2_scales);
  };
  std::vector<float> enc2d;  // weight_2d: enc of block (rb, kb) at rb * KB + kb
  if (weight_2d)
    for (int64_t rb = 0; rb < RB; ++rb)
      for (int64_t kb = 0; kb < KB; ++kb) enc2d.push_back(enc_of(rb * 128, rb * 128 + 128, kb * 128, kb * 128 + 128));
  if (rows) {  // 1x128 tiles along C (or the 128x128 block's scale)
    const int64_t R4 = R - R % 4;
    if (R % 4 && R < 4) fail(op, ": ", R, " rows: a row count that is not a multiple of 4 must be at least 4");
    rows->codes = Tensor::empty({R, C}, DType::U8, Device::CPU);
    rows->scale_inv = Tensor::empty({KB, R4}, DType::F32, Device::CPU);
    if (R4 != R) rows->tail_scale_inv = Tensor::empty({KB, 4}, DType::F32, Device::CPU);
    uint8_t* q = static_cast<uint8_t*>(rows->codes.raw());
    float* s = rows->scale_inv.f32();
    for (int64_t r = 0; r < R; ++r)
      for (int64_t kb = 0; kb < KB; ++kb) {
        const int64_t c0 = kb * 128;
        const float enc = weight_2d ? enc2d[size_t(r / 128 * KB + kb)] : enc_of(r, r + 1, c0, c0 + 128);
        if (r < R4) s[kb * R4 + r] = 1.0f / enc;
        if (R4 != R && r >= R - 4) rows->tail_scale_inv.f32()[kb * 4 + r - (R - 4)] = 1.0f / enc;
        for (int64_t c = c0; c < c0 + 128; ++c) q[r * C + c] = fp8_encode(v[size_t(r * C + c)] * enc, t);
      }
  }
  if (cols) {  // 128x1 tiles along R, transposed (or the 128x128 block's scale)
    cols->codes = Tensor::empty({C, Rp}, DType::U8, Device::CPU);
    cols->scale_inv = Tensor::empty({RB, C}, DType::F32, Device::CPU);
    uint8_t* q = static_cast<uint8_t*>(cols->codes.raw());
    float* s = cols->scale_inv.f32();
    for (int64_t c = 0; c < C; ++c)
      for (int64_t rb = 0; rb < RB; ++rb) {
        const int64_t r0 = rb * 128;
        const float enc = weight_2d ? enc2d[size_t(rb * KB + c / 128)] : enc_of(r0, r0 + 128, c, c + 1);
        s[rb * C + c] = 1.0f / enc;
        for (int64_t r = r0; r < r0 + 128; ++r) q[c * Rp + r] = r < R ? fp8_encode(v[size_t(r * C + c)] * enc, t) : 0;
      }
  }
}

void hadamard16_rows(Tensor& out, const Tensor& x, uint64_t seed) {
  const char* op = "hadamard16_rows";
  require_f32(out, op, "out");
  require_f32(x, op, "x");
  if (out.numel() != x.numel()) fail(op, ": out ", out.describe(), " must match x ", x.describe());
  const int64_t C = x.dim() ? x.size(-1) : 1;
  const int64_t R = C ? x.numel() / C : 0;
  if (R % 16) fail(op, ": x needs a multiple of 16 rows, got ", x.describe());
  float sign[16];
  hadamard16_signs(seed, sign);
  std::vector<float> col(16);
  const float* in = x.f32();
  float* o = out.f32();
  for (int64_t g = 0; g < R; g += 16)
    for (int64_t c = 0; c < C; ++c) {
      for (int i = 0; i < 16; ++i) col[size_t(i)] = in[(g + i) * C + c] * sign[i];
      for (int i = 0; i < 16; ++i) {
        float s = 0.0f;
        for (int j = 0; j < 16; ++j) s += (__builtin_popcount(unsigned(i & j)) & 1) ? -col[size_t(j)] : col[size_t(j)];
        o[(g + i) * C + c] = 0.25f * s;
      }
    }
}

}  // namespace cpu
}  // namespace biofm::ops
