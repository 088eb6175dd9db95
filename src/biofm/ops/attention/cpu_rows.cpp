// Context parallelism's attention of a share's query rows against a whole batch (op.h), CPU:
// plain loops over (query row, head), the scores of one query at a time. The reference for a
// GPU form; it does 1/cp_size of the whole batch's attention work on each rank.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "biofm/ops/attention/op.h"
#include "biofm/ops/cpu_util.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

struct RowsDims {
  int64_t N, T, W, Hq, Hkv, D, group, B;
};

RowsDims check_rows_args(const char* op, const Tensor& qkv, const QkvHeads& h, const Tensor& rows,
                         const Tensor& cu_seqlens, const Tensor& seq_lens) {
  require_f32(qkv, op, "qkv");
  require_i32(rows, op, "rows");
  if (h.hkv <= 0 || h.hq % h.hkv != 0)
    fail(op, ": query heads (", h.hq, ") must be a multiple of kv heads (", h.hkv, ")");
  RowsDims d{};
  d.Hq = h.hq;
  d.Hkv = h.hkv;
  d.D = h.head_dim;
  d.group = h.hq / h.hkv;
  d.W = (d.Hq + 2 * d.Hkv) * d.D;
  if (qkv.dim() != 2 || qkv.size(1) != d.W)
    fail(op, ": qkv must be [N, ", d.W, "] for ", d.Hq, " + 2 x ", d.Hkv, " heads of ", d.D, ", got ", qkv.describe());
  d.N = qkv.size(0);
  d.T = rows.numel();
  check_layout(cu_seqlens, seq_lens, d.N, op);
  d.B = seq_lens.numel();
  for (int64_t t = 0; t < d.T; ++t)
    if (rows.i32()[t] < 0 || rows.i32()[t] >= d.N) fail(op, ": rows[", t, "] = ", rows.i32()[t], " is not a row of qkv");
  return d;
}

// The sequence holding batch row g and g's position in it; {-1, 0} for a padding row.
std::pair<int64_t, int64_t> locate(const int32_t* cu, const int32_t* len, int64_t B, int64_t g) {
  const int64_t s = int64_t(std::upper_bound(cu, cu + B + 1, int32_t(g)) - cu) - 1;
  if (s < 0 || s >= B || g - cu[s] >= len[s]) return {-1, 0};
  return {s, g - cu[s]};
}

float dot(const float* a, const float* b, int64_t n) {
  float r = 0;
  for (int64_t i = 0; i < n; ++i) r += a[i] * b[i];
  return r;
}

}  // namespace

void attention_forward_packed_rows(Tensor& out, Tensor& lse, const Tensor& qkv, const QkvHeads& heads,
                                   const Tensor& rows, const Tensor& cu_seqlens, const Tensor& seq_lens,
                                   const AttentionShape& a) {
  const char* op = "attention_forward_packed_rows";
  const RowsDims d = check_rows_args(op, qkv, heads, rows, cu_seqlens, seq_lens);
  require_f32_shape(out, {d.T, d.Hq, d.D}, op, "out");
  require_f32_shape(lse, {d.T, d.Hq}, op, "lse");
  const int32_t* cu = cu_seqlens.i32();
  const int32_t* len = seq_lens.i32();
  const float* x = qkv.f32();
  float* o = out.f32();
  float* l = lse.f32();
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads_for(d.T * d.Hq * d.D * 64))
  for (int64_t t = 0; t < d.T; ++t) {
    const auto [s, j] = locate(cu, len, d.B, rows.i32()[t]);
    std::memset(o + t * d.Hq * d.D, 0, size_t(d.Hq * d.D) * sizeof(float));
    std::fill(l + t * d.Hq, l + (t + 1) * d.Hq, 0.0f);
    if (s < 0) continue;
    const int64_t keys = a.causal ? j + 1 : len[s];
    std::vector<float> p(static_cast<size_t>(keys));
    for (int64_t h = 0; h < d.Hq; ++h) {
      const float* q = x + int64_t(rows.i32()[t]) * d.W + h * d.D;
      const int64_t kcol = (d.Hq + h / d.group) * d.D, vcol = kcol + d.Hkv * d.D;
      float m = -INFINITY;
      for (int64_t i = 0; i < keys; ++i) {
        p[size_t(i)] = a.scale * dot(q, x + (cu[s] + i) * d.W + kcol, d.D);
        m = std::max(m, p[size_t(i)]);
      }
      double sum = 0;
      for (int64_t i = 0; i < keys; ++i) sum += std::exp(double(p[size_t(i)] - m));
      const float lse_th = m + float(std::log(sum));
      l[t * d.Hq + h] = lse_th;
      float* oh = o + (t * d.Hq + h) * d.D;
      for (int64_t i = 0; i < keys; ++i) {
        const float w = std::exp(p[size_t(i)] - lse_th);
        const float* v = x + (cu[s] + i) * d.W + vcol;
        for (int64_t c = 0; c < d.D; ++c) oh[c] += w * v[c];
      }
    }
  }
}

void attention_backward_packed_rows(Tensor& dq_rows, Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                                    const QkvHeads& heads, const Tensor& out, const Tensor& lse, const Tensor& rows,
                                    const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_backward_packed_rows";
  const RowsDims d = check_rows_args(op, qkv, heads, rows, cu_seqlens, seq_lens);
  require_f32_shape(dout, {d.T, d.Hq, d.D}, op, "dout");
  require_f32_shape(out, {d.T, d.Hq, d.D}, op, "out");
  require_f32_shape(lse, {d.T, d.Hq}, op, "lse");
  require_f32_shape(dq_rows, {d.T, d.W}, op, "dq_rows");
  require_f32_shape(dkv, {d.N, d.W}, op, "dkv");
  const int32_t* cu = cu_seqlens.i32();
  const int32_t* len = seq_lens.i32();
  const float* x = qkv.f32();
  float* dq = dq_rows.f32();
  float* dk = dkv.f32();
  std::memset(dq, 0, size_t(dq_rows.numel()) * sizeof(float));
  std::memset(dk, 0, size_t(dkv.numel()) * sizeof(float));
  // The share's rows of each sequence: a (sequence, kv head) task owns that sequence's dk, dv
  // rows of the head and its query rows' dq of the heads reading it, so tasks write apart.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> by_seq(size_t(d.B));  // (t, position)
  for (int64_t t = 0; t < d.T; ++t) {
    const auto [s, j] = locate(cu, len, d.B, rows.i32()[t]);
    if (s >= 0) by_seq[size_t(s)].emplace_back(t, j);
  }
  const int64_t tasks = d.B * d.Hkv;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_for(d.T * d.Hq * d.D * 64))
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t s = task / d.Hkv, kvh = task % d.Hkv;
    const int64_t kcol = (d.Hq + kvh) * d.D, vcol = kcol + d.Hkv * d.D;
    for (const auto& [t, j] : by_seq[size_t(s)]) {
      const int64_t keys = a.causal ? j + 1 : len[s];
      for (int64_t h = kvh * d.group; h < (kvh + 1) * d.group; ++h) {
        const float* q = x + int64_t(rows.i32()[t]) * d.W + h * d.D;
        const float* g = dout.f32() + (t * d.Hq + h) * d.D;
        const float* o = out.f32() + (t * d.Hq + h) * d.D;
        const float lse_th = lse.f32()[t * d.Hq + h];
        const float delta = dot(g, o, d.D);  // D_t = dO·O (FlashAttention's identity)
        float* dqh = dq + t * d.W + h * d.D;
        for (int64_t i = 0; i < keys; ++i) {
          const int64_t row = cu[s] + i;
          const float* k = x + row * d.W + kcol;
          const float* v = x + row * d.W + vcol;
          const float p = std::exp(a.scale * dot(q, k, d.D) - lse_th);
          const float ds = p * (dot(g, v, d.D) - delta);
          float* dkr = dk + row * d.W + kcol;
          float* dvr = dk + row * d.W + vcol;
          for (int64_t c = 0; c < d.D; ++c) {
            dqh[c] += a.scale * ds * k[c];
            dkr[c] += a.scale * ds * q[c];
            dvr[c] += p * g[c];
          }
        }
      }
    }
  }
}

}  // namespace biofm::ops::cpu
