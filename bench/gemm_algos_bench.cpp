// How far cuBLASLt's first heuristic choice is from the fastest algorithm it offers, for the
// GEMMs of a training step (forward, input gradient, weight gradient of each linear layer) at
// the ESM-2 650M and Llama 1B shapes. biofm's plan cache takes the first choice unless
// ops.gemm_autotune is on; this bench says what timing the candidates is worth, and for the
// weight gradients what splitting their long K (the tokens) would be worth.
//
// Standalone program (cuBLASLt and the CUDA runtime only):
//   g++ -std=c++20 -O2 -I/usr/local/cuda/include bench/gemm_algos_bench.cpp \
//       -L/usr/local/cuda/lib64 -lcublasLt -lcudart -o gemm_algos_bench
// Run on the GPU machine: ./gemm_algos_bench [candidates] [iterations]   (default 16, 20).
// Layouts as in src/biofm/ops/gemm/cuda.cu: row-major buffers read as column-major transposes.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(x)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_LT(x)                                                                    \
  do {                                                                                 \
    cublasStatus_t s_ = (x);                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(s_));  \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

struct Gemm {
  const char* name;
  cublasOperation_t ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  cudaDataType_t d_type;
  cublasLtEpilogue_t epilogue;  // DEFAULT, BIAS (bf16 bias) or BGRADB (fp32 bias gradient)
  float beta;
};

// Linear layer [N tokens, I in, O out], row-major: the three GEMMs of biofm's linear ops.
void linear(std::vector<Gemm>& g, const char* name, int64_t N, int64_t I, int64_t O, bool bias) {
  static std::vector<std::string> names;  // keep the strings alive
  names.push_back(std::string(name) + " fwd");
  g.push_back({names.back().c_str(), CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, I, I, O, CUDA_R_16BF,
               bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, 0.0f});
  names.push_back(std::string(name) + " dgrad");
  g.push_back({names.back().c_str(), CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, I, O, I, CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT,
               0.0f});
  // (bias gradients come from biofm's column-sum kernel by default, ops.gemm_fused_bgrad = false)
  names.push_back(std::string(name) + " wgrad");
  g.push_back({names.back().c_str(), CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, I, O, I, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT,
               1.0f});
}

}  // namespace

int main(int argc, char** argv) {
  const int want = argc > 1 ? std::atoi(argv[1]) : 16;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  std::vector<Gemm> gs;
  linear(gs, "esm2-650M qkv  ", 16384, 1280, 3840, true);
  linear(gs, "esm2-650M out  ", 16384, 1280, 1280, true);
  linear(gs, "esm2-650M fc1  ", 16384, 1280, 5120, true);
  linear(gs, "esm2-650M fc2  ", 16384, 5120, 1280, true);
  linear(gs, "llama-1B qkv   ", 16384, 2048, 3072, false);
  linear(gs, "llama-1B o     ", 16384, 2048, 2048, false);
  linear(gs, "llama-1B gateup", 16384, 2048, 16384, false);
  linear(gs, "llama-1B down  ", 16384, 8192, 2048, false);

  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  cudaStream_t st;
  CHECK_CUDA(cudaStreamCreate(&st));
  const size_t ws_size = size_t(64) << 20;  // biofm's workspace (cuda_ctx::cublaslt_workspace_size)
  void *ws, *a, *b, *d, *bias;
  const size_t big = size_t(16384) * 16384 * 4;
  CHECK_CUDA(cudaMalloc(&ws, ws_size));
  CHECK_CUDA(cudaMalloc(&a, big));
  CHECK_CUDA(cudaMalloc(&b, big));
  CHECK_CUDA(cudaMalloc(&d, big));
  CHECK_CUDA(cudaMalloc(&bias, 1 << 20));
  {
    // Random operands (all-zero inputs draw less power and would flatter every algorithm):
    // bf16 values in about ±1, a 64 MiB pattern repeated.
    std::vector<uint16_t> h(size_t(32) << 20);
    uint32_t x = 12345;
    for (auto& v : h) {
      x = x * 1664525u + 1013904223u;
      v = uint16_t(0x3c00u + ((x >> 16) & 0x7fu)) | uint16_t((x >> 8) & 0x8000u);  // ±[2^-7, 2^-6)·(1 + f)
    }
    for (size_t off = 0; off < big; off += h.size() * 2) {
      const size_t n = std::min(h.size() * 2, big - off);
      CHECK_CUDA(cudaMemcpy(static_cast<char*>(a) + off, h.data(), n, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(static_cast<char*>(b) + off, h.data(), n, cudaMemcpyHostToDevice));
    }
  }
  CHECK_CUDA(cudaMemset(d, 0, big));
  CHECK_CUDA(cudaMemset(bias, 0, 1 << 20));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);

  std::printf("%-22s %5s %5s %6s %4s %10s %10s %6s %7s %s\n", "gemm", "m", "n", "k", "algs", "first us", "best us",
              "gain", "TFLOP/s", "best's index");
  double total_first = 0, total_best = 0;
  for (const Gemm& g : gs) {
    cublasLtMatmulDesc_t desc;
    CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &g.ta, sizeof(g.ta)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &g.tb, sizeof(g.tb)));
    if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      const int32_t bt = g.epilogue == CUBLASLT_EPILOGUE_BIAS ? CUDA_R_16BF : CUDA_R_32F;
      CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof(g.epilogue)));
      CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
      CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    const bool ta = g.ta == CUBLAS_OP_T, tb = g.tb == CUBLAS_OP_T;
    cublasLtMatrixLayout_t la, lb, lc;
    CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ta ? g.k : g.m, ta ? g.m : g.k, g.lda));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lc, g.d_type, g.m, g.n, g.ldc));
    cublasLtMatmulPreference_t pref;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
                                                  sizeof(ws_size)));
    std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(want));
    int count = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, want, res.data(), &count));
    const float alpha = 1.0f;
    // us per call of one algorithm (after an untimed call), or -1 where cuBLASLt refuses it.
    auto time_us = [&](const cublasLtMatmulAlgo_t& algo, cublasLtMatrixLayout_t a_l, cublasLtMatrixLayout_t b_l,
                       cublasLtMatrixLayout_t c_l, const float* beta) -> double {
      auto run = [&] {
        return cublasLtMatmul(lt, desc, &alpha, a, a_l, b, b_l, beta, d, c_l, d, c_l, &algo, ws, ws_size, st);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) return -1;
      run();
      cudaEventRecord(e0, st);
      for (int r = 0; r < iters; ++r) run();
      cudaEventRecord(e1, st);
      CHECK_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      return 1000.0 * ms / iters;
    };
    double first = 0, best = 1e30;
    int best_i = -1;
    for (int i = 0; i < count; ++i) {
      const double us = time_us(res[size_t(i)].algo, la, lb, lc, &g.beta);
      if (us < 0) continue;
      if (i == 0) first = us;
      if (us < best) {
        best = us;
        best_i = i;
      }
    }
    total_first += first;
    total_best += best;
    const double flop = 2.0 * double(g.m) * double(g.n) * double(g.k);
    std::printf("%-22s %5lld %5lld %6lld %4d %10.1f %10.1f %5.1f%% %7.0f %d\n", g.name, (long long)g.m,
                (long long)g.n, (long long)g.k, count, first, best, 100.0 * (first - best) / first,
                flop / best / 1e6, best_i);
    // Weight gradients (K = tokens, few output tiles): does splitting K pay? (1) cuBLASLt's own
    // split-K on each candidate (CUBLASLT_ALGO_CONFIG_SPLITK_NUM, checked by AlgoCheck); (2) the
    // two K halves as one strided-batched GEMM into an fp32 scratch (beta 0), whose sum into dW
    // would cost another pass (its bandwidth estimate printed beside it).
    if (g.beta == 1.0f && g.epilogue == CUBLASLT_EPILOGUE_DEFAULT) {
      double best_split = 1e30;
      int best_split_i = -1, best_split_k = 0;
      for (int i = 0; i < std::min(count, 8); ++i)
        for (int32_t splits : {2, 3, 4, 6, 8}) {
          cublasLtMatmulAlgo_t algo = res[size_t(i)].algo;
          if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits)) !=
              CUBLAS_STATUS_SUCCESS)
            continue;
          cublasLtMatmulHeuristicResult_t check{};
          if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, lc, lc, &algo, &check) != CUBLAS_STATUS_SUCCESS ||
              check.workspaceSize > ws_size)
            continue;
          const double us = time_us(algo, la, lb, lc, &g.beta);
          if (us > 0 && us < best_split) {
            best_split = us;
            best_split_i = i;
            best_split_k = splits;
          }
        }
      if (best_split_i >= 0)
        std::printf("%-22s   cuBLASLt split-K: best %.1f us (%.0f TFLOP/s; candidate %d, %d splits)\n", "",
                    best_split, flop / best_split / 1e6, best_split_i, best_split_k);
      else
        std::printf("%-22s   cuBLASLt split-K: no candidate accepts SPLITK_NUM\n", "");
      // (2) two K halves, batched.
      cublasLtMatrixLayout_t ba, bb, bc;
      CHECK_LT(cublasLtMatrixLayoutCreate(&ba, CUDA_R_16BF, ta ? g.k / 2 : g.m, ta ? g.m : g.k / 2, g.lda));
      CHECK_LT(cublasLtMatrixLayoutCreate(&bb, CUDA_R_16BF, tb ? g.n : g.k / 2, tb ? g.k / 2 : g.n, g.ldb));
      CHECK_LT(cublasLtMatrixLayoutCreate(&bc, CUDA_R_32F, g.m, g.n, g.ldc));
      const int32_t two = 2;
      const int64_t sa = (g.k / 2) * (ta ? 1 : g.lda), sb = (g.k / 2) * (tb ? g.ldb : 1), sc = g.m * g.n;
      for (auto [l, stride] : {std::pair{ba, sa}, std::pair{bb, sb}, std::pair{bc, sc}}) {
        CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof(two)));
        CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                  sizeof(stride)));
      }
      std::vector<cublasLtMatmulHeuristicResult_t> bres(8);
      int bcount = 0;
      CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, ba, bb, bc, bc, pref, 8, bres.data(), &bcount));
      double bbest = 1e30;
      const float zero = 0.0f;
      for (int i = 0; i < bcount; ++i) {
        const double us = time_us(bres[size_t(i)].algo, ba, bb, bc, &zero);
        if (us >= 0) bbest = std::min(bbest, us);
      }
      // Summing the halves into dW: read 2 halves + dW, write dW (fp32) at ~3 TB/s.
      const double sum_us = 4.0 * double(g.m) * double(g.n) * 4.0 / 3.0e6;
      if (bbest < 1e29)
        std::printf("%-22s   two K halves batched: %.1f us + ~%.1f us to sum = %.1f us (%.0f TFLOP/s)\n", "", bbest,
                    sum_us, bbest + sum_us, flop / (bbest + sum_us) / 1e6);
      else
        std::printf("%-22s   two K halves batched: no algorithm\n", "");
      cublasLtMatrixLayoutDestroy(ba);
      cublasLtMatrixLayoutDestroy(bb);
      cublasLtMatrixLayoutDestroy(bc);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
  }
  std::printf("sum of one call each: first choice %.1f us, best %.1f us (%.1f%% less)\n", total_first, total_best,
              100.0 * (total_first - total_best) / total_first);
  return 0;
}
