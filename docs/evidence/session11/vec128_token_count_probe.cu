// VEC128 x VEC128 FP8 GEMM with a token count N that is not a multiple of 4: offered? and which
// leading dimension of B's scale tensor (N or N rounded up to 4) does the result match?
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char** argv) {
  const int M = 256, K = 512, KB = K / 128;
  cublasLtHandle_t lt; cublasLtCreate(&lt);
  for (int ai = 1; ai < argc; ++ai) {
    const int N = atoi(argv[ai]), N4 = (N + 3) / 4 * 4;
    std::vector<float> av(size_t(M) * K), bv(size_t(N) * K);
    std::vector<uint8_t> a(av.size()), b(bv.size());
    const float vals[6] = {1.0f, -0.5f, 2.0f, -1.5f, 0.25f, 3.0f};
    for (size_t i = 0; i < a.size(); ++i) { av[i] = vals[(i * 7 + 3) % 6]; a[i] = __nv_cvt_float_to_fp8(av[i], __NV_SATFINITE, __NV_E4M3); }
    for (size_t i = 0; i < b.size(); ++i) { bv[i] = vals[(i * 5 + 1) % 6]; b[i] = __nv_cvt_float_to_fp8(bv[i], __NV_SATFINITE, __NV_E4M3); }
    std::vector<float> sa(size_t(M) * KB), sb(size_t(N4) * KB + 64, 1.0f);
    for (size_t i = 0; i < sa.size(); ++i) sa[i] = std::ldexp(1.0f, int(i % 5) - 2);
    for (size_t i = 0; i < sb.size(); ++i) sb[i] = std::ldexp(1.0f, int((i * 3) % 4) - 1);
    void *da, *db, *dd, *dsa, *dsb, *ws; size_t wsb = 32 << 20;
    cudaMalloc(&da, a.size()); cudaMalloc(&db, b.size()); cudaMalloc(&dd, size_t(M) * N * 2);
    cudaMalloc(&dsa, sa.size() * 4); cudaMalloc(&dsb, sb.size() * 4); cudaMalloc(&ws, wsb);
    cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice); cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dsa, sa.data(), sa.size() * 4, cudaMemcpyHostToDevice); cudaMemcpy(dsb, sb.data(), sb.size() * 4, cudaMemcpyHostToDevice);
    cublasLtMatmulDesc_t desc; cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t T = CUBLAS_OP_T, Nn = CUBLAS_OP_N; int mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &Nn, sizeof Nn);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dsa, sizeof dsa);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dsb, sizeof dsb);
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, M, K);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, N, K);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, M, N, M);
    cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t r[4]; int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 4, r, &found);
    printf("N=%d: heuristic %s, %d algorithms", N, cublasLtGetStatusName(hs), found);
    if (hs == CUBLAS_STATUS_SUCCESS && found) {
      float one = 1, zero = 0;
      cublasStatus_t rs = cublasLtMatmul(lt, desc, &one, da, la, db, lb, &zero, dd, ld, dd, ld, &r[0].algo, ws, wsb, 0);
      cudaError_t ce = cudaDeviceSynchronize();
      printf("; matmul %s %s", cublasLtGetStatusName(rs), cudaGetErrorString(ce));
      std::vector<__nv_bfloat16> d(size_t(M) * N);
      cudaMemcpy(d.data(), dd, d.size() * 2, cudaMemcpyDeviceToHost);
      for (int ldb : {N, N4}) {
        double err = 0, ref = 0;
        for (int n = 0; n < N; ++n) for (int m = 0; m < M; ++m) {
          double s = 0;
          for (int k = 0; k < K; ++k) s += double(av[size_t(m) * K + k]) * sa[size_t(k / 128) * M + m] * bv[size_t(n) * K + k] * sb[size_t(k / 128) * ldb + n];
          const double g = __bfloat162float(d[size_t(n) * M + m]);
          err += (g - s) * (g - s); ref += s * s;
        }
        printf("; scale ld %d: rel err %.2e", ldb, std::sqrt(err / ref));
      }
    }
    printf("\n");
    cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld); cublasLtMatmulDescDestroy(desc);
    cudaFree(da); cudaFree(db); cudaFree(dd); cudaFree(dsa); cudaFree(dsb); cudaFree(ws);
  }
  return 0;
}
