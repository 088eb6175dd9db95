// Token embedding lookup and ESM-2 token dropout on the CPU.
#include <algorithm>
#include <cstring>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/embedding/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

// Throws (before anything is written) when an id lies outside [0, V).
void check_ids(const Tensor& ids, int64_t V, const char* op) {
  const int32_t* id = ids.i32();
  for (int64_t n = 0, N = ids.numel(); n < N; ++n)
    if (id[n] < 0 || id[n] >= V)
      fail(op, ": token id ", id[n], " at row ", n, " is outside the vocabulary [0, ", V, ")");
}

}  // namespace

void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& table) {
  const char* op = "embedding_forward";
  require_i32(ids, op, "ids");
  require_f32(table, op, "table");
  require_f32(out, op, "out");
  if (table.dim() != 2) fail(op, ": table must be [V, C], got ", table.describe());
  const int64_t V = table.size(0), C = table.size(1), N = ids.numel();
  if (ids.dim() != 1) fail(op, ": ids must be [N], got ", ids.describe());
  if (rows_of(out, C, op, "out") != N)
    fail(op, ": out ", out.describe(), " does not match ids ", ids.describe(), " and table ",
         table.describe());
  check_ids(ids, V, op);
  const int32_t* id = ids.i32();
  const float* tab = table.f32();
  float* y = out.f32();
#pragma omp parallel for schedule(static) num_threads(threads_for(N * C))
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(y + n * C, tab + int64_t(id[n]) * C, size_t(C) * sizeof(float));
}

void embedding_backward(Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  const char* op = "embedding_backward";
  require_f32(dtable, op, "dtable");
  require_f32(dout, op, "dout");
  require_i32(ids, op, "ids");
  if (dtable.dim() != 2) fail(op, ": dtable must be [V, C], got ", dtable.describe());
  const int64_t V = dtable.size(0), C = dtable.size(1), N = ids.numel();
  if (ids.dim() != 1) fail(op, ": ids must be [N], got ", ids.describe());
  if (rows_of(dout, C, op, "dout") != N)
    fail(op, ": dout ", dout.describe(), " does not match ids ", ids.describe(), " and dtable ",
         dtable.describe());
  check_ids(ids, V, op);
  const int32_t* id = ids.i32();
  const float* g = dout.f32();
  float* dt = dtable.f32();
  // Threads split the columns, so repeated ids never race and the sum order is fixed.
  const int nt = int(std::min<int64_t>(threads_for(N * C), std::max<int64_t>(1, C / 16)));
#pragma omp parallel num_threads(nt)
  {
    const int t = thread_id(), T = nt;
    const int64_t c0 = C * t / T, c1 = C * (t + 1) / T;
    for (int64_t n = 0; n < N; ++n) {
      const float* src = g + n * C;
      float* dst = dt + int64_t(id[n]) * C;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

void esm_token_dropout_forward(Tensor& h, Tensor& scale_out, const Tensor& ids,
                               const Tensor& cu_seqlens, const Tensor& seq_lens, int32_t mask_id) {
  const char* op = "esm_token_dropout_forward";
  require_f32(h, op, "h");
  require_i32(ids, op, "ids");
  if (h.dim() != 2) fail(op, ": h must be [N, C], got ", h.describe());
  const int64_t N = h.size(0), C = h.size(1);
  check_shape(ids, {N}, "esm_token_dropout_forward: ids");
  require_f32_shape(scale_out, {N}, op, "scale_out");
  check_layout(cu_seqlens, seq_lens, N, op);
  const int32_t* id = ids.i32();
  const int32_t* cu = cu_seqlens.i32();
  const int32_t* len = seq_lens.i32();
  const int64_t B = seq_lens.numel();
  float* sc = scale_out.f32();
  // Rows outside every sequence's slot (past cu[B]) are padding too.
  std::fill(sc, sc + N, 0.0f);
  for (int64_t s = 0; s < B; ++s) {
    const int64_t start = cu[s], L = len[s];
    int64_t n_mask = 0;
    if (mask_id >= 0)
      for (int64_t i = start; i < start + L; ++i) n_mask += id[i] == mask_id;
    // mask_id < 0: token dropout off, real rows keep factor 1 (only padding is zeroed).
    const float f = mask_id < 0 ? 1.0f : esm_token_dropout_factor(n_mask, L);
    for (int64_t i = start; i < start + L; ++i) sc[i] = (mask_id >= 0 && id[i] == mask_id) ? 0.0f : f;
  }
  float* x = h.f32();
#pragma omp parallel for schedule(static) num_threads(threads_for(N * C))
  for (int64_t n = 0; n < N; ++n) {
    const float f = sc[n];
    float* row = x + n * C;
    if (f == 0.0f)
      std::fill(row, row + C, 0.0f);  // also clears NaN/inf in masked or padding rows
    else
      for (int64_t c = 0; c < C; ++c) row[c] *= f;
  }
}

void scale_rows_inplace(Tensor& dh, const Tensor& scale) {
  const char* op = "scale_rows_inplace";
  require_f32(dh, op, "dh");
  require_f32(scale, op, "scale");
  const int64_t N = dh.dim() >= 1 ? dh.size(0) : 0;
  if (dh.dim() < 1) fail(op, ": dh must be [N, C], got ", dh.describe());
  check_shape(scale, {N}, "scale_rows_inplace: scale");
  const int64_t C = N ? dh.numel() / N : 0;
  const float* sc = scale.f32();
  float* x = dh.f32();
#pragma omp parallel for schedule(static) num_threads(threads_for(N * C))
  for (int64_t n = 0; n < N; ++n) {
    const float f = sc[n];
    float* row = x + n * C;
    for (int64_t c = 0; c < C; ++c) row[c] *= f;
  }
}

}  // namespace biofm::ops::cpu
