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
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "biofm/ops/cuda_util.cuh"
#include "biofm/ops/elementwise/op.h"
#include "biofm/ops/gemm/cublaslt_plans_cuda.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/options.h"

namespace biofm::ops::cuda {
using namespace cuda_detail;
using namespace gemm_detail;

namespace {

cudaDataType_t cuda_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

const char* type_name(int64_t t) {
  switch (cudaDataType_t(t)) {
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_32F: return "f32";
    case CUDA_R_8F_E4M3: return "e4m3";
    case CUDA_R_8F_E5M2: return "e5m2";
    default: return "?";
  }
}

struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof(GemmKey); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return size_t(h);
  }
};

bool fused_bgrad_enabled() { return op_options().gemm_fused_bgrad; }
bool inplace_splitk_only() { return op_options().gemm_inplace_splitk; }

#define GEMM_CHECK(expr, key)                                                                   \
  do {                                                                                          \
    cublasStatus_t st_ = (expr);                                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                           \
      ::biofm::fail(__FILE__, ":", __LINE__, ": cuBLASLt error ", int(st_), " in " #expr " for ", \
                    describe(key));                                                             \
  } while (0)

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // the heuristic returned an algorithm (and cuBLASLt accepted it)
};

class PlanCache {
 public:
  // Runs D = alpha·op(A)·op(B) + beta·C (+ bias, or bias gradient into `bias`) with C = D.
  // Returns false (nothing queued) when cuBLASLt has no algorithm for this GEMM, so that the
  // caller can take another route. With `optional` (a fused epilogue the caller can do
  // without), every heuristic failure and a cublasLtMatmul that rejects the configuration
  // (NOT_SUPPORTED / INVALID_VALUE: checked before anything is launched) also return false,
  // and the key is remembered as unavailable.
  // C (same layout as D) defaults to D itself.
  bool run(const GemmKey& key, const void* A, const void* B, void* D, float alpha, float beta,
           const void* bias, bool optional = false, const void* C = nullptr, const float* a_scale = nullptr,
           const float* b_scale = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    GemmPlan& plan = get(key, bias, optional, a_scale, b_scale);
    if (!plan.found) return false;
    if (a_scale)
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                                sizeof(a_scale)),
                 key);
    if (b_scale)
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                                sizeof(b_scale)),
                 key);
    if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)),
                 key);
    const cublasStatus_t st =
        cublasLtMatmul(cuda_ctx::cublaslt(), plan.desc, &alpha, A, plan.a, B, plan.b, &beta, C ? C : D, plan.c, D,
                       plan.c, &plan.algo, cuda_ctx::cublaslt_workspace(), cuda_ctx::cublaslt_workspace_size(),
                       cuda_ctx::stream());
    if (optional && (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE)) {
      plan.found = false;
      return false;
    }
    GEMM_CHECK(st, key);
    return true;
  }

 private:
  GemmPlan& get(const GemmKey& key, const void* bias, bool optional, const float* a_scale, const float* b_scale) {
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
    auto plan = std::make_unique<GemmPlan>();
    build(*plan, key, bias, optional, a_scale, b_scale);
    return *plans_.emplace(key, std::move(plan)).first->second;
  }

  static void build(GemmPlan& p, const GemmKey& key, const void* bias, bool optional, const float* a_scale,
                    const float* b_scale) {
    GEMM_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), key);
    const cublasOperation_t ta_op = cublasOperation_t(key.ta), tb_op = cublasOperation_t(key.tb);
    GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta_op, sizeof(ta_op)), key);
    GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb_op, sizeof(tb_op)), key);
    if (key.block_scaled) {
      // cuBLASLt 13.1 offers VEC128 algorithms only when the scale pointers are already set at
      // the heuristic query (without them: INVALID_VALUE; docs/evidence/session11): the first
      // call's pointers go in here, every call sets its own below.
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)), key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)), key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                                sizeof(a_scale)),
                 key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                                sizeof(b_scale)),
                 key);
    }
    if (key.fast_accum) {
      const int8_t on = 1;
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on)), key);
    }
    if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      const cublasLtEpilogue_t epi = cublasLtEpilogue_t(key.epilogue);
      const int32_t bias_type = int32_t(key.bias_type);  // the attribute is an int32 cudaDataType
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof(bias_type)),
                 key);
      GEMM_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                 key);
    }
    // Stored (pre-op) shapes: op_N keeps rows x cols = m x k (A) / k x n (B).
    const bool ta = key.ta == CUBLAS_OP_T, tb = key.tb == CUBLAS_OP_T;
    const cudaDataType_t at = cudaDataType_t(key.a_type), bt = cudaDataType_t(key.b_type),
                         cd = cudaDataType_t(key.cd_type);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p.a, at, uint64_t(ta ? key.k : key.m),
                                          uint64_t(ta ? key.m : key.k), key.lda),
               key);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p.b, bt, uint64_t(tb ? key.n : key.k),
                                          uint64_t(tb ? key.k : key.n), key.ldb),
               key);
    GEMM_CHECK(cublasLtMatrixLayoutCreate(&p.c, cd, uint64_t(key.m), uint64_t(key.n), key.ldc), key);

    cublasLtMatmulPreference_t pref = nullptr;
    GEMM_CHECK(cublasLtMatmulPreferenceCreate(&pref), key);
    const size_t ws = cuda_ctx::cublaslt_workspace_size();
    GEMM_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
               key);
    const uint32_t aligns[4] = {uint32_t(key.align_a), uint32_t(key.align_b), uint32_t(key.align_c),
                                uint32_t(key.align_c)};
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      GEMM_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &aligns[i], sizeof(uint32_t)), key);
    if (inplace_splitk_only()) {
      // Split-K parts summed in the output buffer (or no split-K): no separate reduction kernel.
      const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_INPLACE;
      GEMM_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                      sizeof(mask)),
                 key);
    }
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cuda_ctx::cublaslt(), p.desc, p.a, p.b, p.c, p.c,
                                                             pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS && count > 0) {
      p.algo = result.algo;
      p.found = true;
    } else if (!optional && st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
      fail("cuBLASLt heuristic query failed (status ", int(st), ") for ", describe(key));
    }
  }

  std::mutex mu_;
  std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash> plans_;
};

PlanCache& plan_cache() {
  static PlanCache* c = new PlanCache;  // descriptors live for the process
  return *c;
}

// A copy of device tensor t in a fresh (256-byte aligned) allocation.
Tensor aligned_copy(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype(), Device::CUDA);
  if (t.nbytes())
    BIOFM_CUDA_CHECK(cudaMemcpyAsync(c.raw(), t.raw(), t.nbytes(), cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
  return c;
}

// D = op(A)·op(B) + beta·D. When cuBLASLt has no algorithm for the operands' alignments
// (views at odd element offsets), runs on aligned copies instead.
void gemm(GemmKey key, const Tensor& A, const Tensor& B, const Tensor& D, float beta) {
  if (plan_cache().run(key, A.raw(), B.raw(), D.raw(), 1.0f, beta, nullptr)) return;
  if (key.align_a >= 16 && key.align_b >= 16 && key.align_c >= 16)
    fail("cuBLASLt has no algorithm for ", describe(key));
  const Tensor a = key.align_a < 16 ? aligned_copy(A) : A;
  const Tensor b = key.align_b < 16 ? aligned_copy(B) : B;
  const bool copy_d = key.align_c < 16;
  const Tensor d = copy_d ? (beta != 0.0f ? aligned_copy(D) : Tensor::empty(D.shape(), D.dtype(), Device::CUDA)) : D;
  key.align_a = alignment_of(a.raw());
  key.align_b = alignment_of(b.raw());
  key.align_c = alignment_of(d.raw());
  if (!plan_cache().run(key, a.raw(), b.raw(), d.raw(), 1.0f, beta, nullptr))
    fail("cuBLASLt has no algorithm for ", describe(key));
  if (copy_d)
    BIOFM_CUDA_CHECK(cudaMemcpyAsync(D.raw(), d.raw(), D.nbytes(), cudaMemcpyDeviceToDevice, cuda_ctx::stream()));
}

// dw += doutᵀ·x and dbias += Σ_n dout in one GEMM through the BGRADB epilogue; `key` is the
// plain dw GEMM's. Returns false, with nothing queued, where that route is unavailable: turned
// off, an operand not 16-byte aligned (views at odd offsets), or no algorithm / a rejection
// from cuBLASLt (noted once on stderr). The caller then runs the plain GEMM and the column sums.
bool dw_dbias_fused(GemmKey key, const Tensor& x, const Tensor& dout, const Tensor& dw, Tensor& dbias) {
  if (!fused_bgrad_enabled()) return false;
  if (key.align_a < 16 || key.align_b < 16 || key.align_c < 16) return false;
  // cuBLASLt writes the bias gradient (in D's type, F32); our contract accumulates.
  const Tensor grad = Tensor::empty(dbias.shape(), DType::F32, Device::CUDA);
  // The plan's heuristic saw the first scratch's alignment; every caching-allocator block is its
  // own cudaMalloc, so 256 bytes always holds (checked, not assumed).
  if (alignment_of(grad.raw()) < 256) return false;
  key.epilogue = CUBLASLT_EPILOGUE_BGRADB;  // reduce op(B) = dout[N,O] over k = N: one value per o
  key.bias_type = CUDA_R_32F;
  if (!plan_cache().run(key, x.raw(), dout.raw(), dw.raw(), 1.0f, 1.0f, grad.raw(), /*optional=*/true)) {
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
constexpr int64_t kColRowsPerSplit = 128;  // enough blocks in flight to stream dout at full bandwidth

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

// Stage 2 of dbias: dbias[col] += Σ_split partial[split, col], in double, in split order.
__global__ void colsum_finish_kernel(const float* partial, int64_t splits, int64_t O, float* dbias) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= O) return;
  double s = 0;
  for (int64_t i = 0; i < splits; ++i) s += partial[i * O + col];
  dbias[col] += float(s);
}

template <class T, int V>
void launch_colsum_v(const T* g, int64_t N, int64_t O, float* dbias) {
  cudaStream_t st = cuda_ctx::stream();
  const int64_t splits = std::min<int64_t>((N + kColRowsPerSplit - 1) / kColRowsPerSplit, 65535);
  const int64_t rows_per_split = (N + splits - 1) / splits;
  const int64_t cols_per_block = int64_t(kColThreadsX) * V;
  const dim3 grid(unsigned((O + cols_per_block - 1) / cols_per_block), unsigned(splits));
  const dim3 block(kColThreadsX, kColThreadsY);
  if (splits == 1) {
    colsum_kernel<T, V><<<grid, block, 0, st>>>(g, N, O, rows_per_split, nullptr, dbias);
    BIOFM_CUDA_LAUNCH_CHECK();
    return;
  }
  Scratch partial(size_t(splits * O) * sizeof(float));
  colsum_kernel<T, V><<<grid, block, 0, st>>>(g, N, O, rows_per_split, partial.as<float>(), nullptr);
  BIOFM_CUDA_LAUNCH_CHECK();
  colsum_finish_kernel<<<grid_for(O, 256, int64_t(1) << 20), 256, 0, st>>>(partial.as<float>(), splits, O, dbias);
  BIOFM_CUDA_LAUNCH_CHECK();
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

void check_weight(const Tensor& w, const char* op) {
  require_float(w, op, "w");
  if (w.dim() != 2) fail(op, ": w must be [out, in], got ", w.describe());
}

}  // namespace

namespace gemm_detail {

// Largest power of two (up to 256) that divides the address: cuBLASLt picks kernels that
// assume at most this alignment.
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al) al >>= 1;
  return al;
}

GemmKey make_key(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                 int64_t ldb, int64_t ldc, DType ab, DType cd, const void* A, const void* B, const void* D) {
  GemmKey key{};
  key.ta = ta;
  key.tb = tb;
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = lda;
  key.ldb = ldb;
  key.ldc = ldc;
  key.a_type = key.b_type = cuda_type(ab);
  key.cd_type = cuda_type(cd);
  key.bias_type = key.cd_type;
  key.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  key.align_a = alignment_of(A);
  key.align_b = alignment_of(B);
  key.align_c = alignment_of(D);
  return key;
}

std::string describe(const GemmKey& k) {
  std::ostringstream os;
  os << "GEMM m=" << k.m << " n=" << k.n << " k=" << k.k << " op(A)=" << (k.ta == CUBLAS_OP_T ? "T" : "N")
     << " op(B)=" << (k.tb == CUBLAS_OP_T ? "T" : "N") << " lda=" << k.lda << " ldb=" << k.ldb
     << " ldc=" << k.ldc << " A " << type_name(k.a_type) << " B " << type_name(k.b_type) << " C/D "
     << type_name(k.cd_type) << " epilogue " << int(k.epilogue) << (k.block_scaled ? " VEC128 scales" : "")
     << " alignments " << k.align_a << "/" << k.align_b << "/" << k.align_c;
  return os.str();
}

bool run_plan(const GemmKey& key, const void* A, const void* B, void* D, float alpha, float beta,
              const void* bias, bool optional, const void* C, const float* a_scale, const float* b_scale) {
  return plan_cache().run(key, A, B, D, alpha, beta, bias, optional, C, a_scale, b_scale);
}

void column_sums_into(Tensor& dbias, const Tensor& g) {
  const int64_t O = dbias.numel(), N = O ? g.numel() / O : 0;
  if (N == 0 || O == 0) return;
  if (g.dtype() == DType::BF16)
    launch_colsum(as<__nv_bfloat16>(g), N, O, dbias.f32());
  else
    launch_colsum(as<float>(g), N, O, dbias.f32());
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
      if (plan_cache().run(key, w.raw(), x.raw(), out.raw(), 1.0f, 1.0f, bias.defined() ? bias.raw() : nullptr,
                           /*optional=*/true, residual.raw()))
        return;
      key.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    }
    linear_forward(out, x, w, bias, Tensor());
    add_inplace(out, residual);
    return;
  }
  if (bias.defined() && aligned(bias.raw(), 16)) {
    key.epilogue = CUBLASLT_EPILOGUE_BIAS;
    if (plan_cache().run(key, w.raw(), x.raw(), out.raw(), 1.0f, 0.0f, bias.raw())) return;
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

  if (dx.defined() && N > 0 && I > 0) {
    if (O == 0) {
      dx.zero_();
    } else {
      const Tensor w = in_dtype(w_in, dt);
      const GemmKey key =
          make_key(CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, I, O, I, dt, dt, w.raw(), dout.raw(), dx.raw());
      gemm(key, w, dout, dx, 0.0f);
    }
  }
  if (N == 0) return;
  bool dbias_done = false;
  if (dw.defined() && O > 0 && I > 0) {
    const GemmKey key = make_key(CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, I, O, I, dt, DType::F32, x.raw(),
                                 dout.raw(), dw.raw());
    if (dbias.defined()) dbias_done = dw_dbias_fused(key, x, dout, dw, dbias);
    if (!dbias_done) gemm(key, x, dout, dw, 1.0f);
  }
  if (dbias.defined() && O > 0 && !dbias_done) column_sums_into(dbias, dout);
}

}  // namespace biofm::ops::cuda
