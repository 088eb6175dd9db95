// What the installed cuBLASLt offers for Float8BlockScaling on this GPU: for each pair of scale
// modes of A and B (per-tensor SCALAR_32F, VEC128_32F = one fp32 scale per 128 elements along K,
// BLK128x128_32F = one per 128×128 block), whether cublasLtMatmulAlgoGetHeuristic returns an
// algorithm for an FP8 GEMM (E4M3×E4M3 and E4M3×E5M2, BF16 out, fp32 accumulation, the TN
// layout Hopper's FP8 GEMMs take), and for those that run, which layout of the scale tensors
// the result matches: "outer-fastest" (index kb·M + m for VEC128, kb·MB + mb for BLK) or
// "k-fastest" (m·KB + kb, mb·KB + kb), against a host reference of exact values.
//
// Standalone (no biofm code):  nvcc -std=c++17 -O2 -arch=sm_90a bench/fp8_blockscale_probe.cu \
//                                  -lcublasLt -o fp8_blockscale_probe && ./fp8_blockscale_probe
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

namespace {

constexpr int M = 256, N = 384, K = 512;  // 2, 3, 4 blocks of 128
constexpr int MB = M / 128, NB = N / 128, KB = K / 128;

const char* mode_name(int m) {
  return m == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F   ? "SCALAR_32F"
         : m == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F ? "VEC128_32F"
                                                         : "BLK128x128_32F";
}

// Scale of element (row r, k) of an operand with `rows` rows, under a mode, from a scale
// tensor laid out outer-fastest (outer=true) or k-fastest.
float scale_at(const std::vector<float>& s, int mode, int r, int k, int rows, bool outer) {
  const int kb = k / 128, rb = r / 128, RB = rows / 128;
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) return s[0];
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) return outer ? s[size_t(kb * rows + r)] : s[size_t(r * KB + kb)];
  return outer ? s[size_t(kb * RB + rb)] : s[size_t(rb * KB + kb)];
}

size_t scale_count(int mode, int rows) {
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) return 1;
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) return size_t(rows) * KB;
  return size_t(rows / 128) * KB;
}

}  // namespace

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("device %s (sm_%d%d), cuBLASLt %zu (headers %d)\n", p.name, p.major, p.minor, cublasLtGetVersion(),
              CUBLAS_VERSION);
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return std::printf("cublasLtCreate failed\n"), 1;

  // Operands: A [M rows, K] and B [N rows, K], both K-major (TN); exact small values.
  std::vector<uint8_t> a(size_t(M) * K), b(size_t(N) * K);
  std::vector<float> av(a.size()), bv(b.size());
  const float vals[6] = {1.0f, -0.5f, 2.0f, -1.5f, 0.25f, 3.0f};
  for (size_t i = 0; i < a.size(); ++i) {
    av[i] = vals[(i * 7 + 3) % 6];
    a[i] = __nv_cvt_float_to_fp8(av[i], __NV_SATFINITE, __NV_E4M3);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    bv[i] = vals[(i * 5 + 1) % 6];
    b[i] = __nv_cvt_float_to_fp8(bv[i], __NV_SATFINITE, __NV_E4M3);  // (E5M2 below: same values)
  }
  std::vector<uint8_t> b5(b.size());
  for (size_t i = 0; i < b.size(); ++i) b5[i] = __nv_cvt_float_to_fp8(bv[i], __NV_SATFINITE, __NV_E5M2);
  uint8_t *da, *db, *db5;
  __nv_bfloat16* dd;
  float *dsa, *dsb;
  void* ws;
  const size_t ws_bytes = 64 << 20;
  CK(cudaMalloc(&da, a.size()));
  CK(cudaMalloc(&db, b.size()));
  CK(cudaMalloc(&db5, b.size()));
  CK(cudaMalloc(&dd, size_t(M) * N * 2));
  CK(cudaMalloc(&dsa, size_t(M) * KB * 4));
  CK(cudaMalloc(&dsb, size_t(N) * KB * 4));
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db5, b5.data(), b.size(), cudaMemcpyHostToDevice));

  const int modes[3] = {CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                        CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F};
  for (int e5 = 0; e5 < 2; ++e5)
    for (int ma : modes)
      for (int mb : modes) {
        // Scales: powers of two that differ between blocks, so a wrong layout shows.
        std::vector<float> sa(scale_count(ma, M)), sb(scale_count(mb, N));
        for (size_t i = 0; i < sa.size(); ++i) sa[i] = std::ldexp(1.0f, int(i % 5) - 2);
        for (size_t i = 0; i < sb.size(); ++i) sb[i] = std::ldexp(1.0f, int((i * 3) % 4) - 1);
        cudaMemcpy(dsa, sa.data(), sa.size() * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dsb, sb.data(), sb.size() * 4, cudaMemcpyHostToDevice);

        cublasLtMatmulDesc_t desc;
        cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        const cublasOperation_t T = CUBLAS_OP_T, Nn = CUBLAS_OP_N;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &Nn, sizeof Nn);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dsa, sizeof dsa);
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dsb, sizeof dsb);
        cublasLtMatrixLayout_t la, lb, ld;
        cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, M, K);  // A: K×M col-major (op T: M×K)
        cublasLtMatrixLayoutCreate(&lb, e5 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3, K, N, K);
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, M, N, M);
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulPreferenceCreate(&pref);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
        cublasLtMatmulHeuristicResult_t res[4];
        int found = 0;
        const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 4, res, &found);
        std::printf("A %-14s B %-14s E4M3x%s: ", mode_name(ma), mode_name(mb), e5 ? "E5M2" : "E4M3");
        if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
          std::printf("not offered (%s, %d algorithms)\n", cublasLtGetStatusName(hs), found);
        } else {
          const float one = 1.0f, zero = 0.0f;
          const cublasStatus_t rs = cublasLtMatmul(lt, desc, &one, da, la, e5 ? db5 : db, lb, &zero, dd, ld, dd, ld,
                                                   &res[0].algo, ws, ws_bytes, nullptr);
          cudaError_t ce = cudaDeviceSynchronize();
          if (rs != CUBLAS_STATUS_SUCCESS || ce != cudaSuccess) {
            std::printf("offered, but the matmul failed (%s, %s)\n", cublasLtGetStatusName(rs), cudaGetErrorString(ce));
          } else {
            std::vector<__nv_bfloat16> d(size_t(M) * N);
            cudaMemcpy(d.data(), dd, d.size() * 2, cudaMemcpyDeviceToHost);
            const char* match = "neither layout";
            for (int outer = 1; outer >= 0; --outer) {
              double err = 0, ref_norm = 0;
              for (int n = 0; n < N; ++n)
                for (int m = 0; m < M; ++m) {
                  double r = 0;
                  for (int k = 0; k < K; ++k)
                    r += double(av[size_t(m) * K + k]) * scale_at(sa, ma, m, k, M, outer) * bv[size_t(n) * K + k] *
                         scale_at(sb, mb, n, k, N, outer);
                  const double g = double(__bfloat162float(d[size_t(n) * M + m]));
                  err += (g - r) * (g - r);
                  ref_norm += r * r;
                }
              if (std::sqrt(err / ref_norm) < 1e-2) {
                match = outer ? "matches the outer-fastest scale layout" : "matches the k-fastest scale layout";
                break;
              }
            }
            std::printf("runs; %s\n", match);
          }
        }
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(desc);
      }
  cublasLtDestroy(lt);
  return 0;
}
