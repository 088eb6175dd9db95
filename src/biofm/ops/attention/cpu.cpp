// Scaled dot-product attention over a packed (THD) or padded (BSHD) batch, CPU.
//
// Work is split into (sequence, head) tasks run in parallel with OpenMP; inside a task the
// queries are taken in blocks of kBlockQ rows, and the block's score matrix [rows, keys]
// is the only N×N-like temporary (per thread, never for the whole batch). QKᵀ, PV and the
// four backward products go through single-threaded cblas_sgemm calls. Forward keeps only
// lse (logsumexp of each query's scaled scores); backward recomputes the probabilities
// P = exp(scale·q·k - lse) and uses D_i = dO_i·O_i (FlashAttention's identity).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "biofm/ops/attention/op.h"
#include "biofm/ops/cpu_util.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

constexpr int64_t kBlockQ = 128;

struct Dims {
  int64_t N, Hq, Hkv, D, B, group, max_len;
};

Dims check_args(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                const Tensor& cu_seqlens, const Tensor& seq_lens) {
  require_f32(q, op, "q");
  require_f32(k, op, "k");
  require_f32(v, op, "v");
  if (q.dim() != 3) fail(op, ": q must be [N, Hq, D], got ", q.describe());
  if (k.dim() != 3) fail(op, ": k must be [N, Hkv, D], got ", k.describe());
  Dims d{};
  d.N = q.size(0);
  d.Hq = q.size(1);
  d.D = q.size(2);
  d.Hkv = k.size(1);
  if (k.size(0) != d.N || k.size(2) != d.D)
    fail(op, ": k ", k.describe(), " does not match q ", q.describe());
  if (v.shape() != k.shape()) fail(op, ": v ", v.describe(), " must match k ", k.describe());
  if (d.Hkv == 0 || d.Hq % d.Hkv != 0)
    fail(op, ": query heads (", d.Hq, ") must be a multiple of kv heads (", d.Hkv, ")");
  d.group = d.Hq / d.Hkv;
  check_layout(cu_seqlens, seq_lens, d.N, op);
  d.B = seq_lens.numel();
  d.max_len = 0;
  for (int64_t s = 0; s < d.B; ++s) d.max_len = std::max<int64_t>(d.max_len, seq_lens.i32()[s]);
  return d;
}

// Rows of `t` ([N, H, D] viewed as N rows of `row` floats) that belong to no sequence.
void zero_padding_rows(float* t, int64_t row, const int32_t* cu, const int32_t* len, int64_t B,
                       int64_t N) {
  for (int64_t s = 0; s < B; ++s) {
    const int64_t a = int64_t(cu[s]) + len[s], b = cu[s + 1];
    if (b > a) std::memset(t + a * row, 0, size_t((b - a) * row) * sizeof(float));
  }
  const int64_t tail = B ? cu[B] : 0;
  if (N > tail) std::memset(t + tail * row, 0, size_t((N - tail) * row) * sizeof(float));
}

// (sequence, head) pairs with at least one token, longest sequences first (better balance).
std::vector<std::pair<int32_t, int32_t>> make_tasks(const int32_t* len, int64_t B, int64_t H) {
  std::vector<std::pair<int32_t, int32_t>> tasks;
  for (int64_t s = 0; s < B; ++s)
    if (len[s] > 0)
      for (int64_t h = 0; h < H; ++h) tasks.emplace_back(int32_t(s), int32_t(h));
  std::stable_sort(tasks.begin(), tasks.end(),
                   [&](const auto& a, const auto& b) { return len[a.first] > len[b.first]; });
  return tasks;
}

// Threads for a batch: 1 when the whole batch is tiny (a parallel region would cost more
// than it saves), else up to one per task.
int threads_for_attention(const int32_t* len, int64_t B, int64_t heads, int64_t D, size_t tasks) {
  double work = 0;
  for (int64_t s = 0; s < B; ++s) work += double(len[s]) * double(len[s]) * double(heads * D);
  if (work < 262144.0) return 1;
  return int(std::max<int64_t>(1, std::min<int64_t>(max_threads(), int64_t(tasks))));
}

}  // namespace

void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_forward";
  const Dims d = check_args(op, q, k, v, cu_seqlens, seq_lens);
  require_f32_shape(out, q.shape(), op, "out");
  if (lse.defined()) require_f32_shape(lse, {d.N, d.Hq}, op, "lse");
  const int32_t* cu = cu_seqlens.i32();
  const int32_t* len = seq_lens.i32();
  const int64_t Hq = d.Hq, D = d.D, group = d.group;
  const int64_t ldq = Hq * D, ldk = d.Hkv * D;
  const float* qp = q.f32();
  const float* kp = k.f32();
  const float* vp = v.f32();
  float* op_ = out.f32();
  float* lp = lse.defined() ? lse.f32() : nullptr;
  zero_padding_rows(op_, Hq * D, cu, len, d.B, d.N);
  if (lp) zero_padding_rows(lp, Hq, cu, len, d.B, d.N);
  if (D == 0) {
    if (lp)
      for (int64_t s = 0; s < d.B; ++s)
        for (int64_t i = cu[s]; i < cu[s] + len[s]; ++i)
          for (int64_t h = 0; h < Hq; ++h)  // every score is 0: lse = log(#keys seen)
            lp[i * Hq + h] = std::log(float(a.causal ? i - cu[s] + 1 : len[s]));
    return;
  }
  const auto tasks = make_tasks(len, d.B, Hq);
  const int64_t bq = std::min<int64_t>(kBlockQ, d.max_len);
  const float scale = a.scale;
  const bool causal = a.causal;
  BlasSingleThread blas_guard;
#pragma omp parallel num_threads(threads_for_attention(len, d.B, Hq, D, tasks.size()))
  {
    std::vector<float> sbuf(size_t(bq * d.max_len));
    float* S = sbuf.data();
#pragma omp for schedule(dynamic, 1)
    for (size_t t = 0; t < tasks.size(); ++t) {
      const int64_t s = tasks[t].first, h = tasks[t].second, g = h / group;
      const int64_t start = cu[s], L = len[s];
      const float* Q = qp + (start * Hq + h) * D;
      const float* K = kp + (start * d.Hkv + g) * D;
      const float* V = vp + (start * d.Hkv + g) * D;
      float* O = op_ + (start * Hq + h) * D;
      for (int64_t i0 = 0; i0 < L; i0 += bq) {
        const int64_t m = std::min(bq, L - i0);
        const int64_t nk = causal ? i0 + m : L;
        // S[m, nk] = scale · Q_blk · Kᵀ
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(nk), int(D), scale,
                    Q + i0 * ldq, int(ldq), K, int(ldk), 0.0f, S, int(nk));
        for (int64_t r = 0; r < m; ++r) {
          float* row = S + r * nk;
          const int64_t valid = causal ? i0 + r + 1 : nk;
          const float mx = max_of(row, valid);
          const float sum = exp_shift_sum(row, valid, mx);
          const float inv = 1.0f / sum;
#pragma omp simd
          for (int64_t j = 0; j < valid; ++j) row[j] *= inv;
          for (int64_t j = valid; j < nk; ++j) row[j] = 0.0f;
          if (lp) lp[(start + i0 + r) * Hq + h] = mx + std::log(sum);
        }
        // O_blk[m, D] = P · V
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(D), int(nk), 1.0f, S,
                    int(nk), V, int(ldk), 0.0f, O + i0 * ldq, int(ldq));
      }
    }
  }
}

void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_backward";
  const Dims d = check_args(op, q, k, v, cu_seqlens, seq_lens);
  require_f32_shape(dout, q.shape(), op, "dout");
  require_f32_shape(out, q.shape(), op, "out");
  require_f32_shape(lse, {d.N, d.Hq}, op, "lse");
  require_f32_shape(dq, q.shape(), op, "dq");
  require_f32_shape(dk, k.shape(), op, "dk");
  require_f32_shape(dv, v.shape(), op, "dv");
  const int32_t* cu = cu_seqlens.i32();
  const int32_t* len = seq_lens.i32();
  const int64_t Hq = d.Hq, Hkv = d.Hkv, D = d.D, group = d.group;
  const int64_t ldq = Hq * D, ldk = Hkv * D;
  const float* qp = q.f32();
  const float* kp = k.f32();
  const float* vp = v.f32();
  const float* gp = dout.f32();
  const float* outp = out.f32();
  const float* lp = lse.f32();
  float* dqp = dq.f32();
  float* dkp = dk.f32();
  float* dvp = dv.f32();
  // dk and dv are accumulated over the query blocks and heads of a group: start from zero.
  zero_padding_rows(dqp, Hq * D, cu, len, d.B, d.N);
  dk.zero_();
  dv.zero_();
  if (D == 0) return;
  const auto tasks = make_tasks(len, d.B, Hkv);
  const int64_t bq = std::min<int64_t>(kBlockQ, d.max_len);
  const float scale = a.scale;
  const bool causal = a.causal;
  BlasSingleThread blas_guard;
#pragma omp parallel num_threads(threads_for_attention(len, d.B, Hq, D, tasks.size()))
  {
    std::vector<float> pbuf(size_t(bq * d.max_len)), dpbuf(size_t(bq * d.max_len));
    std::vector<float> di(static_cast<size_t>(bq));
    float* P = pbuf.data();
    float* dP = dpbuf.data();
    // One task owns kv head g of sequence s, so its dk/dv rows are written by no one else.
#pragma omp for schedule(dynamic, 1)
    for (size_t t = 0; t < tasks.size(); ++t) {
      const int64_t s = tasks[t].first, g = tasks[t].second;
      const int64_t start = cu[s], L = len[s];
      const float* K = kp + (start * Hkv + g) * D;
      const float* V = vp + (start * Hkv + g) * D;
      float* dK = dkp + (start * Hkv + g) * D;
      float* dV = dvp + (start * Hkv + g) * D;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        const float* Q = qp + (start * Hq + h) * D;
        const float* G = gp + (start * Hq + h) * D;
        const float* O = outp + (start * Hq + h) * D;
        float* dQ = dqp + (start * Hq + h) * D;
        for (int64_t i0 = 0; i0 < L; i0 += bq) {
          const int64_t m = std::min(bq, L - i0);
          const int64_t nk = causal ? i0 + m : L;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(nk), int(D), scale,
                      Q + i0 * ldq, int(ldq), K, int(ldk), 0.0f, P, int(nk));
          for (int64_t r = 0; r < m; ++r) {
            float* row = P + r * nk;
            const int64_t valid = causal ? i0 + r + 1 : nk;
            const float l = lp[(start + i0 + r) * Hq + h];
            exp_shift(row, valid, l);
            for (int64_t j = valid; j < nk; ++j) row[j] = 0.0f;
            const float* gr = G + (i0 + r) * ldq;
            const float* orow = O + (i0 + r) * ldq;
            float acc = 0.0f;
            for (int64_t c = 0; c < D; ++c) acc += gr[c] * orow[c];
            di[size_t(r)] = acc;
          }
          // dV[nk, D] += Pᵀ · dO_blk
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(nk), int(D), int(m), 1.0f, P,
                      int(nk), G + i0 * ldq, int(ldq), 1.0f, dV, int(ldk));
          // dP[m, nk] = dO_blk · Vᵀ
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(nk), int(D), 1.0f,
                      G + i0 * ldq, int(ldq), V, int(ldk), 0.0f, dP, int(nk));
          // dS = P ∘ (dP - D_i), times scale for the gradient of the raw q·k.
          for (int64_t r = 0; r < m; ++r) {
            const float* prow = P + r * nk;
            float* drow = dP + r * nk;
            const float dr = di[size_t(r)];
#pragma omp simd
            for (int64_t j = 0; j < nk; ++j) drow[j] = prow[j] * (drow[j] - dr) * scale;
          }
          // dQ_blk[m, D] = dS · K (overwrites: this task is the only writer of head h)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(D), int(nk), 1.0f,
                      dP, int(nk), K, int(ldk), 0.0f, dQ + i0 * ldq, int(ldq));
          // dK[nk, D] += dSᵀ · Q_blk
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(nk), int(D), int(m), 1.0f, dP,
                      int(nk), Q + i0 * ldq, int(ldq), 1.0f, dK, int(ldk));
        }
      }
    }
  }
}

namespace {

// The packed qkv[N, (hq + 2·hkv)·D] split into (pack = false) or filled from (pack = true)
// separate q[N, hq, D], k and v[N, hkv, D].
void move_packed(const char* op, const Tensor& qkv, const QkvHeads& h, Tensor& q, Tensor& k, Tensor& v, bool pack) {
  require_f32(qkv, op, "qkv");
  const int64_t wq = h.hq * h.head_dim, wkv = h.hkv * h.head_dim, row = wq + 2 * wkv;
  if (h.hq <= 0 || h.hkv <= 0 || h.head_dim <= 0 || qkv.dim() != 2 || qkv.size(1) != row)
    fail(op, ": qkv must be [N, (Hq + 2·Hkv)·D] = [N, ", row, "], got ", qkv.describe());
  const int64_t N = qkv.size(0);
  if (!pack) {
    q = Tensor::empty({N, h.hq, h.head_dim}, DType::F32);
    k = Tensor::empty({N, h.hkv, h.head_dim}, DType::F32);
    v = Tensor::empty({N, h.hkv, h.head_dim}, DType::F32);
  }
  float* base = qkv.f32();
  for (int64_t n = 0; n < N; ++n) {
    float* r = base + n * row;
    float* parts[3] = {q.f32() + n * wq, k.f32() + n * wkv, v.f32() + n * wkv};
    const int64_t at[3] = {0, wq, wq + wkv}, width[3] = {wq, wkv, wkv};
    for (int i = 0; i < 3; ++i) {
      float* dst = pack ? r + at[i] : parts[i];
      const float* src = pack ? parts[i] : r + at[i];
      std::copy(src, src + width[i], dst);
    }
  }
}

}  // namespace

void attention_forward_packed(Tensor& out, Tensor& lse, const Tensor& qkv, const QkvHeads& heads,
                              const Tensor& cu_seqlens, const Tensor& seq_lens, const AttentionShape& a) {
  Tensor q, k, v;
  move_packed("attention_forward_packed", qkv, heads, q, k, v, /*pack=*/false);
  cpu::attention_forward(out, lse, q, k, v, cu_seqlens, seq_lens, a);
}

void attention_backward_packed(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const QkvHeads& heads,
                               const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens,
                               const Tensor& seq_lens, const AttentionShape& a) {
  const char* op = "attention_backward_packed";
  Tensor q, k, v;
  move_packed(op, qkv, heads, q, k, v, /*pack=*/false);
  require_f32(dqkv, op, "dqkv");
  if (dqkv.shape() != qkv.shape()) fail(op, ": dqkv ", dqkv.describe(), " must match qkv ", qkv.describe());
  Tensor dq = Tensor::empty(q.shape(), DType::F32), dk = Tensor::empty(k.shape(), DType::F32),
         dv = Tensor::empty(v.shape(), DType::F32);
  cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, seq_lens, a);
  move_packed(op, dqkv, heads, dq, dk, dv, /*pack=*/true);
}

// Nothing to prepare on the CPU.
void attention_prepare_forward(Device, DType, const std::vector<AttentionBatch>&, const QkvHeads&, bool) {}

}  // namespace biofm::ops::cpu
