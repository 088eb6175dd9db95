// How much do NCCL all-reduces slow the GEMMs running beside them, and does NCCL's symmetric
// memory (buffers from ncclMemAlloc registered with ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC))
// or its CTA "efficiency" policy change that? The question behind ddp's 90-92% scaling
// (docs/PERFORMANCE.md: the reductions are hidden, but backward gets slower beside them).
//
// One process drives every visible GPU (ncclCommInitAll). Per GPU: a chain of bf16 GEMMs the
// size of ESM-2 650M's MLP (16384 × 5120 × 1280) on one stream, and, on a second stream,
// `buckets` all-reduces of `bucket_mb` MiB of fp32 (ESM-2 650M: 33 buckets of ~79 MB). Times:
// GEMMs alone, all-reduces alone, both at once (each with CUDA events, best of 3).
//
// Standalone program, built here and run on the two-GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90a bench/nccl_overlap_probe.cu -I<nccl include> -L<nccl lib>
//        -lnccl -lcublas -o nccl_overlap_probe
//   NCCL_NVLS_ENABLE=0 ./nccl_overlap_probe [buckets 33] [bucket_mb 79] [gemms 60]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t err_ = (x);                                                                     \
    if (err_ != cudaSuccess) { std::printf("CUDA %s at line %d\n", cudaGetErrorString(err_), __LINE__); std::exit(1); } \
  } while (0)
#define NK(x)                                                                                  \
  do {                                                                                         \
    ncclResult_t r = (x);                                                                      \
    if (r != ncclSuccess) { std::printf("NCCL %s at line %d\n", ncclGetErrorString(r), __LINE__); std::exit(1); } \
  } while (0)

struct Gpu {
  cudaStream_t compute, comm;
  cublasHandle_t blas;
  __nv_bfloat16 *a, *b, *c;
  float* grads;  // buckets × bucket floats, one allocation
  ncclWindow_t win = nullptr;
  cudaEvent_t e[4];
};

int main(int argc, char** argv) {
  const int buckets = argc > 1 ? std::atoi(argv[1]) : 33;
  const size_t bucket = size_t(argc > 2 ? std::atoi(argv[2]) : 79) << 18;  // MiB -> floats
  const int gemms = argc > 3 ? std::atoi(argv[3]) : 60;
  const int M = 5120, N = 16384, K = 1280;
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  std::vector<int> devs(ndev);
  for (int i = 0; i < ndev; ++i) devs[i] = i;
  std::printf("%d GPUs, %d buckets of %zu MiB fp32, %d GEMMs %dx%dx%d bf16\n", ndev, buckets, bucket >> 18, gemms, M, N, K);

  // Three configurations: plain cudaMalloc buffers; ncclMemAlloc + symmetric window; plain buffers
  // on a communicator with the CTA efficiency policy.
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<ncclComm_t> comms(ndev);
    if (mode == 2) {
      ncclUniqueId id;
      NK(ncclGetUniqueId(&id));
      NK(ncclGroupStart());
      for (int i = 0; i < ndev; ++i) {
        CK(cudaSetDevice(i));
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
        NK(ncclCommInitRankConfig(&comms[i], ndev, id, i, &cfg));
      }
      NK(ncclGroupEnd());
    } else {
      NK(ncclCommInitAll(comms.data(), ndev, devs.data()));
    }
    std::vector<Gpu> g(ndev);
    for (int i = 0; i < ndev; ++i) {
      CK(cudaSetDevice(i));
      CK(cudaStreamCreateWithFlags(&g[i].compute, cudaStreamNonBlocking));
      int lo, hi;
      CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
      CK(cudaStreamCreateWithPriority(&g[i].comm, cudaStreamNonBlocking, hi));
      if (cublasCreate(&g[i].blas) != CUBLAS_STATUS_SUCCESS) return 1;
      cublasSetStream(g[i].blas, g[i].compute);
      CK(cudaMalloc(&g[i].a, size_t(M) * K * 2));
      CK(cudaMalloc(&g[i].b, size_t(K) * N * 2));
      CK(cudaMalloc(&g[i].c, size_t(M) * N * 2));
      CK(cudaMemset(g[i].a, 0, size_t(M) * K * 2));
      CK(cudaMemset(g[i].b, 0, size_t(K) * N * 2));
      const size_t bytes = size_t(buckets) * bucket * 4;
      if (mode == 1)
        NK(ncclMemAlloc(reinterpret_cast<void**>(&g[i].grads), bytes));
      else
        CK(cudaMalloc(&g[i].grads, bytes));
      CK(cudaMemset(g[i].grads, 0, bytes));
      for (auto& e : g[i].e) CK(cudaEventCreate(&e));
    }
    if (mode == 1) {
      NK(ncclGroupStart());
      for (int i = 0; i < ndev; ++i)
        NK(ncclCommWindowRegister(comms[i], g[i].grads, size_t(buckets) * bucket * 4, &g[i].win, NCCL_WIN_COLL_SYMMETRIC));
      NK(ncclGroupEnd());
    }
    const float one = 1.0f, zero = 0.0f;
    auto launch_gemms = [&] {
      for (int i = 0; i < ndev; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaEventRecord(g[i].e[0], g[i].compute));
        for (int k = 0; k < gemms; ++k)
          cublasGemmEx(g[i].blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, g[i].a, CUDA_R_16BF, K, g[i].b, CUDA_R_16BF, K,
                       &zero, g[i].c, CUDA_R_16BF, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        CK(cudaEventRecord(g[i].e[1], g[i].compute));
      }
    };
    auto launch_reduces = [&] {
      for (int i = 0; i < ndev; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaEventRecord(g[i].e[2], g[i].comm));
      }
      for (int bk = 0; bk < buckets; ++bk) {
        NK(ncclGroupStart());
        for (int i = 0; i < ndev; ++i)
          NK(ncclAllReduce(g[i].grads + size_t(bk) * bucket, g[i].grads + size_t(bk) * bucket, bucket, ncclFloat, ncclSum,
                           comms[i], g[i].comm));
        NK(ncclGroupEnd());
      }
      for (int i = 0; i < ndev; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaEventRecord(g[i].e[3], g[i].comm));
      }
    };
    auto sync = [&] {
      for (int i = 0; i < ndev; ++i) {
        CK(cudaSetDevice(i));
        CK(cudaDeviceSynchronize());
      }
    };
    auto ms = [&](int i, int from, int to) {
      float t = 0;
      CK(cudaEventElapsedTime(&t, g[i].e[from], g[i].e[to]));
      return double(t);
    };
    double gemm_alone = 1e30, red_alone = 1e30, gemm_both = 1e30, red_both = 1e30;
    for (int rep = 0; rep < 4; ++rep) {  // the first is warm-up
      launch_gemms();
      sync();
      if (rep) gemm_alone = std::min(gemm_alone, ms(0, 0, 1));
      launch_reduces();
      sync();
      if (rep) red_alone = std::min(red_alone, ms(0, 2, 3));
      launch_gemms();
      launch_reduces();
      sync();
      if (rep) gemm_both = std::min(gemm_both, ms(0, 0, 1)), red_both = std::min(red_both, ms(0, 2, 3));
    }
    const double gb = double(buckets) * double(bucket) * 4 / 1e9;
    static const char* names[] = {"cudaMalloc buffers", "ncclMemAlloc + symmetric window", "CTA efficiency policy"};
    std::printf("%-32s GEMMs alone %7.2f ms | all-reduces alone %7.2f ms (%.0f GB/s algbw) | together: GEMMs %7.2f ms "
                "(+%.1f%%), all-reduces %7.2f ms\n",
                names[mode], gemm_alone, red_alone, gb / (red_alone / 1e3), gemm_both,
                100.0 * (gemm_both / gemm_alone - 1.0), red_both);
    if (mode == 1) {
      NK(ncclGroupStart());
      for (int i = 0; i < ndev; ++i) NK(ncclCommWindowDeregister(comms[i], g[i].win));
      NK(ncclGroupEnd());
    }
    for (int i = 0; i < ndev; ++i) {
      CK(cudaSetDevice(i));
      if (mode == 1)
        NK(ncclMemFree(g[i].grads));
      else
        CK(cudaFree(g[i].grads));
      CK(cudaFree(g[i].a));
      CK(cudaFree(g[i].b));
      CK(cudaFree(g[i].c));
      cublasDestroy(g[i].blas);
      NK(ncclCommDestroy(comms[i]));
    }
  }
  return 0;
}
