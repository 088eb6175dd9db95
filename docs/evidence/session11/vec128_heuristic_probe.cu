// Which descriptor / preference settings make cuBLASLt offer a VEC128xVEC128 FP8 GEMM at a shape.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  cublasLtHandle_t lt; cublasLtCreate(&lt);
  void *a, *b, *d, *sa, *sb, *ws; size_t wsb = 32 << 20;
  cudaMalloc(&a, size_t(M) * K); cudaMalloc(&b, size_t(N) * K); cudaMalloc(&d, size_t(M) * N * 4);
  cudaMalloc(&sa, size_t(M) * (K / 128 + 1) * 4); cudaMalloc(&sb, size_t(N) * (K / 128 + 1) * 4); cudaMalloc(&ws, wsb);
  cudaMemset(a, 0, size_t(M) * K); cudaMemset(b, 0, size_t(N) * K); cudaMemset(sa, 0, size_t(M) * (K / 128 + 1) * 4); cudaMemset(sb, 0, size_t(N) * (K / 128 + 1) * 4);
  for (int ptr = 0; ptr < 2; ++ptr) for (int inpl = 0; inpl < 2; ++inpl) for (int al = 0; al < 2; ++al) for (int f32 = 0; f32 < 2; ++f32) for (int bias = 0; bias < 2; ++bias) {
    if (f32 && bias) continue;
    cublasLtMatmulDesc_t desc; cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t T = CUBLAS_OP_T, Nn = CUBLAS_OP_N; int mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &Nn, sizeof Nn);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode);
    if (ptr) { cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
               cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb); }
    void* biasp = d;
    if (bias) { cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS; int bt = CUDA_R_16BF;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasp, sizeof biasp); }
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, M, K);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, N, K);
    cublasLtMatrixLayoutCreate(&ld, f32 ? CUDA_R_32F : CUDA_R_16BF, M, N, M);
    cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    if (al) { uint32_t v = 256; cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &v, 4);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &v, 4);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &v, 4);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &v, 4); }
    if (inpl) { uint32_t m = CUBLASLT_REDUCTION_SCHEME_INPLACE; cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &m, 4); }
    cublasLtMatmulHeuristicResult_t r[4]; int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 4, r, &found);
    const char* run = "-";
    if (hs == CUBLAS_STATUS_SUCCESS && found) {
      if (!ptr) { cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
                  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb); }
      float one = 1, zero = 0;
      cublasStatus_t rs = cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &r[0].algo, ws, wsb, 0);
      run = (rs == CUBLAS_STATUS_SUCCESS && cudaDeviceSynchronize() == cudaSuccess) ? "runs" : cublasLtGetStatusName(rs);
    }
    printf("%dx%dx%d ptr_before_heuristic=%d inplace_mask=%d align_prefs=%d out=%s bias=%d: %s found=%d %s\n", M, N, K, ptr, inpl, al, f32 ? "f32" : "bf16", bias, cublasLtGetStatusName(hs), found, run);
    cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld); cublasLtMatmulDescDestroy(desc);
  }
  return 0;
}
