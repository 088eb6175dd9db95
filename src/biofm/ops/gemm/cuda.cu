// Linear layers on the GPU through cuBLASLt.
//
// Row-major tensors map onto column-major cuBLASLt matrices by reading every buffer as its
// own transpose: a row-major [R, C] buffer is a column-major C x R matrix with ld = C. So
//   forward   out[N,O] = x[N,I]·w[O,I]ᵀ   ->  outᵀ (O x N) = op_T(w: I x O) · (xᵀ: I x N)
//             m = O, n = N, k = I, bias[O] added per row of D by the BIAS epilogue;
//   dx        dx[N,I] = dout[N,O]·w[O,I]  ->  dxᵀ (I x N) = (wᵀ: I x O) · (doutᵀ: O x N)
//             m = I, n = N, k = O;
//   dw        dw[O,I] += dout[N,O]ᵀ·x[N,I] -> dwᵀ (I x O) += (xᵀ: I x N) · op_T(doutᵀ: O x N)
//             m = I, n = O, k = N, beta = 1, C = D = dw (always F32).
//   dbias     dbias[o] += Σ_n dout[n,o]: in the dw GEMM, op(B) = dout (k x n = N x O), so the
//             column sums are cuBLASLt's BGRADB epilogue (reduce op(B) over k, one value per
//             column of D, i.e. per o). cuBLASLt writes (never adds) the bias gradient, in
//             D's type (F32), so it goes to an F32 scratch [O] that one small kernel adds into
//             dbias. Fallback, when dw is not wanted, an operand is not 16-byte aligned, or
//             cuBLASLt has no algorithm for / rejects the epilogue: the plain dw GEMM and a
//             deterministic two-stage column-sum kernel (fp32 partials per block of rows,
//             summed per column in double in a fixed order).
//
// Compute type is always CUBLAS_COMPUTE_32F: fp32 GEMMs stay exact fp32 (no TF32) so they
// can be held tightly against the CPU; bf16 GEMMs accumulate in fp32. Each distinct GEMM
// (shape, leading dimensions, dtypes, epilogue, pointer alignments) gets its descriptors and
// its heuristic algorithm once; later calls reuse them from a small map.
//
// Options (ops/options.h):
//   ops.gemm_fused_bgrad: false   never use the BGRADB epilogue (always the column-sum kernel);
//   ops.gemm_inplace_splitk: true restrict split-K algorithms to in-place reduction (no
//                                 separate split-K reduction kernel); an experiment, off by
//                                 default: it may make the heuristic pick slower kernels.
//   ops.gemm_autotune: true       time cuBLASLt's candidate algorithms once per shape bucket
//                                 (the plan cache, cublaslt_plans_cuda.cpp; kept in checkpoints,
//                                 tuning.h).
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <atomic>
#include <initializer_list>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "biofm/core/side_stream.h"
#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/gemm/cublaslt_plans_cuda.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/options.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;
using namespace gemm_detail;

namespace {

// A copy of device tensor t in a fresh (256-byte aligned) allocation.
Tensor aligned_copy(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype(), Device::CUDA);
  if (t.nbytes())
    BIOFM_CUDA_CHECK(cudaMemcpyAsync(c.raw(), t.raw(), t.nbytes(), cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
  return c;
}

// A bf16 row-major matrix whose rows are not a whole number of 16-byte units (ESM-2's 33-token
// vocabulary in its LM head) keeps cuBLASLt off its tensor-core kernels: the LM head's weight
// gradient ran in cuBLAS's generic fallback, 1.2 ms of a 183 ms ESM-2 650M step. A copy with rows
// padded to 16 bytes (the padding is never read) lets them run; ld is the padded row length.
struct PaddedRows {
  Tensor t;
  int64_t ld = 0;
};
// The row length cuBLASLt wants for `cols` bf16 columns: cols itself, or rounded up to 8.
int64_t padded_cols(DType dt, int64_t cols) { return dt == DType::BF16 ? ceil_div(cols, int64_t(8)) * 8 : cols; }
// Copies rows × cols elements between row-major buffers of row lengths dst_ld and src_ld.
void copy_rows(void* dst, int64_t dst_ld, const void* src, int64_t src_ld, int64_t rows, int64_t cols, DType dt) {
  const size_t es = dtype_size(dt);
  BIOFM_CUDA_CHECK(cudaMemcpy2DAsync(dst, size_t(dst_ld) * es, src, size_t(src_ld) * es, size_t(cols) * es,
                                     size_t(rows), cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
}
PaddedRows padded_rows(const Tensor& m, int64_t rows, int64_t cols) {
  const int64_t ld = padded_cols(m.dtype(), cols);
  if (ld == cols || rows == 0) return {m, cols};
  PaddedRows p{Tensor::empty({rows, ld}, m.dtype(), Device::CUDA), ld};
  copy_rows(p.t.raw(), ld, m.raw(), cols, rows, cols, m.dtype());
  return p;
}

// D = op(A)·op(B) + beta·D. When cuBLASLt has no algorithm for the operands' alignments
// (views at odd element offsets), runs on aligned copies instead.
void gemm(GemmKey key, const Tensor& A, const Tensor& B, const Tensor& D, float beta) {
  if (run_plan(key, A.raw(), B.raw(), D.raw(), 1.0f, beta, nullptr)) return;
  if (key.align_a >= 16 && key.align_b >= 16 && key.align_c >= 16)
    fail("cuBLASLt has no algorithm for ", describe(key));
  const Tensor a = key.align_a < 16 ? aligned_copy(A) : A;
  const Tensor b = key.align_b < 16 ? aligned_copy(B) : B;
  const bool copy_d = key.align_c < 16;
  const Tensor d = copy_d ? (beta != 0.0f ? aligned_copy(D) : Tensor::empty(D.shape(), D.dtype(), Device::CUDA)) : D;
  key.align_a = alignment_of(a.raw());
  key.align_b = alignment_of(b.raw());
  key.align_c = alignment_of(d.raw());
  if (!run_plan(key, a.raw(), b.raw(), d.raw(), 1.0f, beta, nullptr))
    fail("cuBLASLt has no algorithm for ", describe(key));
  if (copy_d)
    BIOFM_CUDA_CHECK(cudaMemcpyAsync(D.raw(), d.raw(), D.nbytes(), cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
}

// dw += doutᵀ·x and dbias += Σ_n dout in one GEMM through the BGRADB epilogue; `key` is the
// plain dw GEMM's. Returns false, with nothing queued, where that route is unavailable: turned
// off, an operand not 16-byte aligned (views at odd offsets), or no algorithm / a rejection
// from cuBLASLt (noted once on stderr). The caller then runs the plain GEMM and the column sums.
bool dw_dbias_fused(GemmKey key, const Tensor& x, const Tensor& dout, const Tensor& dw, Tensor& dbias) {
  if (!op_options().gemm_fused_bgrad) return false;
  if (key.align_a < 16 || key.align_b < 16 || key.align_c < 16) return false;
  // cuBLASLt writes the bias gradient (in D's type, F32); our contract accumulates.
  const Tensor grad = Tensor::empty(dbias.shape(), DType::F32, Device::CUDA);
  // The plan's heuristic saw the first scratch's alignment; every caching-allocator block is its
  // own cudaMalloc, so 256 bytes always holds (checked, not assumed).
  if (alignment_of(grad.raw()) < 256) return false;
  key.epilogue = CUBLASLT_EPILOGUE_BGRADB;  // reduce op(B) = dout[N,O] over k = N: one value per o
  key.bias_type = CUDA_R_32F;
  if (!run_plan(key, x.raw(), dout.raw(), dw.raw(), 1.0f, 1.0f, grad.raw(), /*optional=*/true)) {
    static std::atomic<bool> noted{false};
    if (!noted.exchange(true))
      std::fprintf(stderr,
                   "biofm gemm: no cuBLASLt BGRADB (fused bias gradient) algorithm for %s; using the separate "
                   "column-sum kernel there (noted once)\n",
                   describe(key).c_str());
    return false;
  }
  cuda::add_inplace(dbias, grad);
  return true;
}

// ---- Kernels ----

// out[n, o] = bias[o], for the route without the fused-bias epilogue.
template <class T, class B>
__global__ void fill_rows_kernel(T* out, const B* bias, int64_t N, int64_t O) {
  const int64_t total = N * O;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_f32<T>(bias ? to_f32(bias[i % O]) : 0.0f);
}

constexpr int kColThreadsX = 32, kColThreadsY = 8;
constexpr int64_t kColMinRowsPerSplit = 32;

// Stage 1 of dbias: a block of (32 x 8) threads owns 32·V columns (V consecutive columns per
// thread, one vector load per row) and sums rows [split·R, split·R + R) of them, each of the
// 8 row lanes taking every 8th row; then writes partial[split, col] or, with a single split,
// adds into dbias directly. V > 1 needs O % V == 0 and a V-element aligned g.
template <class T, int V>
__global__ void __launch_bounds__(kColThreadsX* kColThreadsY)
    colsum_kernel(const T* g, int64_t N, int64_t O, int64_t rows_per_split, float* partial, float* dbias) {
  __shared__ float red[kColThreadsY][kColThreadsX * V + 1];
  const int64_t col0 = (int64_t(blockIdx.x) * kColThreadsX + threadIdx.x) * V;
  const int64_t split = blockIdx.y;
  const int64_t r0 = split * rows_per_split;
  const int64_t r1 = min(N, r0 + rows_per_split);
  float acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = 0.0f;
  if (col0 < O) {
#pragma unroll 4
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColThreadsY) {
      const Pack<T, V> p = load_pack<V>(g + r * O + col0);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] += to_f32(p.v[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) red[threadIdx.y][threadIdx.x * V + j] = acc[j];
  __syncthreads();
  // Thread (x, y) finishes columns x + 32·y, x + 32·(y + 8), ... of the block's 32·V.
  for (int c = threadIdx.y * kColThreadsX + threadIdx.x; c < kColThreadsX * V; c += kColThreadsX * kColThreadsY) {
    const int64_t col = int64_t(blockIdx.x) * kColThreadsX * V + c;
    if (col >= O) continue;
    float s = 0.0f;
#pragma unroll
    for (int y = 0; y < kColThreadsY; ++y) s += red[y][c];
    if (partial)
      partial[split * O + col] = s;
    else
      dbias[col] += s;
  }
}

// Stage 2 of dbias: dbias[col] += Σ_split partial[split, col], in double. A block is 32
// columns x kFinishLanes lanes; lane y sums splits y, y + kFinishLanes, ... and the lanes' sums
// are added in lane order (a fixed order: deterministic), so that a few columns with many
// splits (O = 640 at 16k rows: 352 splits) are not one long serial chain per column.
constexpr int kFinishLanes = 32;
__global__ void __launch_bounds__(32 * kFinishLanes)
    colsum_finish_kernel(const float* partial, int64_t splits, int64_t O, float* dbias) {
  __shared__ double red[kFinishLanes][32];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  double s = 0;
  if (col < O)
    for (int64_t i = threadIdx.y; i < splits; i += kFinishLanes) s += partial[i * O + col];
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || col >= O) return;
  double t = 0;
  for (int y = 0; y < kFinishLanes; ++y) t += red[y][threadIdx.x];
  dbias[col] += float(t);
}

template <class T, int V>
void launch_colsum_v(const T* g, int64_t N, int64_t O, float* dbias) {
  cudaStream_t st = cuda_ctx::stream();
  // Enough row splits for about 8 resident blocks per SM over the column blocks, at least
  // kColMinRowsPerSplit rows each.
  const int64_t cols_per_block = int64_t(kColThreadsX) * V;
  const int64_t col_blocks = (O + cols_per_block - 1) / cols_per_block;
  const int64_t splits = std::clamp<int64_t>(ceil_div(sm_waves(8), col_blocks), 1,
                                             std::min<int64_t>(ceil_div(N, kColMinRowsPerSplit), 65535));
  const int64_t rows_per_split = (N + splits - 1) / splits;
  const dim3 grid{unsigned(col_blocks), unsigned(splits)};
  const dim3 block(kColThreadsX, kColThreadsY);
  if (splits == 1) {
    colsum_kernel<T, V><<<grid, block, 0, st>>>(g, N, O, rows_per_split, nullptr, dbias);
    BIOFM_CUDA_LAUNCH_CHECK();
    return;
  }
  Scratch partial(size_t(splits * O) * sizeof(float));
  colsum_kernel<T, V><<<grid, block, 0, st>>>(g, N, O, rows_per_split, partial.as<float>(), nullptr);
  BIOFM_CUDA_LAUNCH_CHECK();
  column_partials_into(dbias, O, partial.as<float>(), splits);
}

// dbias[O] += column sums of g[N, O].
template <class T>
void launch_colsum(const T* g, int64_t N, int64_t O, float* dbias) {
  constexpr int V = 16 / sizeof(T);
  if (O % V == 0 && aligned(g, 16))
    launch_colsum_v<T, V>(g, N, O, dbias);
  else
    launch_colsum_v<T, 1>(g, N, O, dbias);
}

template <class T>
const T* as(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}
template <class T>
T* as_mut(const Tensor& t) {
  return static_cast<T*>(t.raw());
}

// out[N, O] = bias broadcast (or zeros).
void fill_rows(Tensor& out, const Tensor& bias, int64_t N, int64_t O) {
  if (!bias.defined()) {
    out.zero_();
    return;
  }
  const unsigned blocks = grid_for(N * O, 256, sm_waves(8));
  cudaStream_t st = cuda_ctx::stream();
  const bool tb = out.dtype() == DType::BF16, bb = bias.dtype() == DType::BF16;
  if (tb && bb)
    fill_rows_kernel<<<blocks, 256, 0, st>>>(as_mut<__nv_bfloat16>(out), as<__nv_bfloat16>(bias), N, O);
  else if (tb)
    fill_rows_kernel<<<blocks, 256, 0, st>>>(as_mut<__nv_bfloat16>(out), as<float>(bias), N, O);
  else if (bb)
    fill_rows_kernel<<<blocks, 256, 0, st>>>(as_mut<float>(out), as<__nv_bfloat16>(bias), N, O);
  else
    fill_rows_kernel<<<blocks, 256, 0, st>>>(as_mut<float>(out), as<float>(bias), N, O);
  BIOFM_CUDA_LAUNCH_CHECK();
}

// `t` in dtype `dt`: itself, or a converted copy (the weight's compute copy normally already
// matches the activations; this keeps mixed calls correct).
Tensor in_dtype(const Tensor& t, DType dt) {
  if (!t.defined() || t.dtype() == dt) return t;
  Tensor c = Tensor::empty(t.shape(), dt, Device::CUDA);
  cuda::cast(c, t);
  return c;
}

}  // namespace

namespace gemm_detail {

void check_weight(const Tensor& w, const char* op) {
  require_float(w, op, "w");
  if (w.dim() != 2) fail(op, ": w must be [out, in], got ", w.describe());
}

void column_sums_into(Tensor& dbias, const Tensor& g) {
  const int64_t O = dbias.numel(), N = O ? g.numel() / O : 0;
  if (N == 0 || O == 0) return;
  if (g.dtype() == DType::BF16)
    launch_colsum(as<__nv_bfloat16>(g), N, O, dbias.f32());
  else
    launch_colsum(as<float>(g), N, O, dbias.f32());
}

void column_partials_into(float* dbias, int64_t O, const float* partial, int64_t splits) {
  if (O == 0 || splits == 0) return;
  colsum_finish_kernel<<<unsigned(ceil_div(O, 32)), dim3(32, kFinishLanes), 0, cuda_ctx::stream()>>>(partial, splits,
                                                                                                   O, dbias);
  BIOFM_CUDA_LAUNCH_CHECK();
}

LinearDims check_linear_forward(const char* op, const Tensor& out, const Tensor& x, const Tensor& w,
                                const Tensor& bias, const Tensor& residual) {
  require_float(x, op, "x");
  check_weight(w, op);
  require_dtype(out, x.dtype(), op, "out");
  const int64_t O = w.size(0), I = w.size(1);
  const int64_t N = rows_of(x, I, op, "x");
  if (rows_of(out, O, op, "out") != N)
    fail(op, ": out ", out.describe(), " does not match x ", x.describe(), " and w ", w.describe());
  if (bias.defined()) {
    require_float(bias, op, "bias");
    if (bias.shape() != Shape{O}) fail(op, ": bias must have shape [", O, "], got ", bias.describe());
  }
  if (residual.defined()) {
    require_dtype(residual, x.dtype(), op, "residual");
    if (residual.numel() != out.numel())
      fail(op, ": residual ", residual.describe(), " does not match out ", out.describe());
  }
  return {N, I, O};
}

LinearDims check_linear_backward(const char* op, const Tensor& dx, const Tensor& dw, const Tensor& dbias,
                                 const Tensor& dout, const Tensor& x, const Tensor& w) {
  require_float(x, op, "x");
  require_dtype(dout, x.dtype(), op, "dout");
  check_weight(w, op);
  const int64_t O = w.size(0), I = w.size(1);
  const int64_t N = rows_of(x, I, op, "x");
  if (rows_of(dout, O, op, "dout") != N)
    fail(op, ": dout ", dout.describe(), " does not match x ", x.describe(), " and w ", w.describe());
  if (dx.defined()) {
    require_dtype(dx, x.dtype(), op, "dx");
    if (rows_of(dx, I, op, "dx") != N) fail(op, ": dx ", dx.describe(), " does not match x ", x.describe());
  }
  if (dw.defined()) {
    require_dtype(dw, DType::F32, op, "dw");
    if (dw.shape() != Shape{O, I}) fail(op, ": dw must have shape [", O, ", ", I, "], got ", dw.describe());
  }
  if (dbias.defined()) {
    require_dtype(dbias, DType::F32, op, "dbias");
    if (dbias.shape() != Shape{O}) fail(op, ": dbias must have shape [", O, "], got ", dbias.describe());
  }
  return {N, I, O};
}

}  // namespace gemm_detail

void linear_forward(Tensor& out, const Tensor& x, const Tensor& w_in, const Tensor& bias_in,
                    const Tensor& residual) {
  const auto [N, I, O] = check_linear_forward("linear_forward", out, x, w_in, bias_in, residual);
  if (N == 0 || O == 0) return;  // (I == 0 reads as N == 0 rows, as on the CPU)
  const DType dt = x.dtype();
  const Tensor w = in_dtype(w_in, dt);
  const Tensor bias = in_dtype(bias_in, dt);
  GemmKey key = make_key(CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, I, I, O, dt, dt, w.raw(), x.raw(), out.raw());
  if (residual.defined()) {
    // The residual add as the GEMM's C operand: out = x·Wᵀ + bias + residual in one pass.
    if (alignment_of(residual.raw()) >= key.align_c && (!bias.defined() || aligned(bias.raw(), 16))) {
      key.epilogue = bias.defined() ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      if (run_plan(key, w.raw(), x.raw(), out.raw(), 1.0f, 1.0f, bias.defined() ? bias.raw() : nullptr,
                           /*optional=*/true, residual.raw()))
        return;
      key.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    }
    linear_forward(out, x, w, bias, Tensor());
    add_inplace(out, residual);
    return;
  }
  if (const int64_t ld = padded_cols(dt, O); ld != O && (!bias.defined() || aligned(bias.raw(), 16))) {
    // Rows of out not a whole number of 16 bytes (see padded_rows): the GEMM writes a padded
    // scratch and one strided copy packs it into out.
    Tensor p = Tensor::empty({N, ld}, dt, Device::CUDA);
    GemmKey pk = make_key(CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, I, I, ld, dt, dt, w.raw(), x.raw(), p.raw());
    pk.epilogue = bias.defined() ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (run_plan(pk, w.raw(), x.raw(), p.raw(), 1.0f, 0.0f, bias.defined() ? bias.raw() : nullptr,
                 /*optional=*/true)) {
      copy_rows(out.raw(), O, p.raw(), ld, N, O, dt);
      return;
    }
  }
  if (bias.defined() && aligned(bias.raw(), 16)) {
    key.epilogue = CUBLASLT_EPILOGUE_BIAS;
    if (run_plan(key, w.raw(), x.raw(), out.raw(), 1.0f, 0.0f, bias.raw())) return;
    key.epilogue = CUBLASLT_EPILOGUE_DEFAULT;  // no fused-bias algorithm: bias first, then GEMM
  }
  if (bias.defined()) {
    fill_rows(out, bias, N, O);
    gemm(key, w, x, out, 1.0f);
  } else {
    gemm(key, w, x, out, 0.0f);
  }
}

void linear_backward(Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& dout, const Tensor& x,
                     const Tensor& w_in) {
  const auto [N, I, O] = check_linear_backward("linear_backward", dx, dw, dbias, dout, x, w_in);
  const DType dt = x.dtype();

  const bool gemms = N > 0 && I > 0 && O > 0 && (dx.defined() || dw.defined());
  const PaddedRows g = gemms ? padded_rows(dout, N, O) : PaddedRows{dout, O};  // dout, rows padded if needed
  // The weight and bias gradients may go on the side stream, starting beside the input gradient.
  side_stream::Scope beside(weight_grads_beside() && N > 0 && (dw.defined() || dbias.defined()));
  if (dx.defined() && N > 0 && I > 0) {
    if (O == 0) {
      dx.zero_();
    } else {
      const Tensor w = in_dtype(w_in, dt);
      const GemmKey key =
          make_key(CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, I, g.ld, I, dt, dt, w.raw(), g.t.raw(), dx.raw());
      gemm(key, w, g.t, dx, 0.0f);
    }
  }
  if (N == 0) return;
  beside.enter();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &g.t, &dout, &dw, &dbias}) beside.hold(*t);
  bool dbias_done = false;
  if (dw.defined() && O > 0 && I > 0) {
    const GemmKey key = make_key(CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, I, g.ld, I, dt, DType::F32, x.raw(),
                                 g.t.raw(), dw.raw());
    if (dbias.defined()) dbias_done = dw_dbias_fused(key, x, g.t, dw, dbias);
    if (!dbias_done) gemm(key, x, g.t, dw, 1.0f);
  }
  if (dbias.defined() && O > 0 && !dbias_done) column_sums_into(dbias, dout);
}

}  // namespace biofm::ops::cuda
