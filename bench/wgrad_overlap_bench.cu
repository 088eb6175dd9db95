// Would running the weight-gradient GEMMs on a second stream, beside the chain of input
// gradients, make a transformer layer's backward faster? The weight gradients (K = the tokens,
// few output tiles) leave a part-filled last wave on the 132 SMs, and the memory-bound kernels
// of backward (norm backward, rope, the GELU gradient, bias column sums) leave the tensor cores
// idle; on a second stream each could fill the other's gaps.
//
// This replays the backward of ESM-2 650M layers (16,384 tokens) and Llama 1B layers (one
// 8,192-token window) with cuBLASLt's first-choice GEMMs (as biofm's plan cache takes them)
// and copy kernels of the same bytes standing in for the memory-bound ops; attention is left
// out. Two modes, alternated: everything on one stream, and each linear layer's weight
// gradient + bias column sum on a side stream that waits for an event recorded when the
// layer's output gradient is ready (the input gradients stay on the main stream), with both
// streams at the default priority and with the main stream at the highest.
//
// Standalone (cuBLASLt and the CUDA runtime only):
//   nvcc -std=c++17 -O2 -arch=sm_90a bench/wgrad_overlap_bench.cu -lcublasLt -o wgrad_overlap_bench
// Run on the GPU machine: ./wgrad_overlap_bench [rounds] (default 6).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                           \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)
#define CHECK_LT(x)                                                                   \
  do {                                                                                \
    cublasStatus_t s_ = (x);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

// Reads `in_bytes` and writes `out_bytes` (16-byte vectors, grid-stride): a memory-bound op.
__global__ void traffic_kernel(const uint4* in, int64_t n_in, uint4* out, int64_t n_out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  uint4 acc{0, 0, 0, 0};
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_in; i += stride) {
    const uint4 v = __ldcs(in + i);
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
    if (i < n_out) out[i] = acc;
  }
  for (int64_t i = n_in + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_out; i += stride) out[i] = acc;
}

struct Lt {
  cublasLtHandle_t h;
  void* ws[2];
  size_t ws_size = size_t(64) << 20;
};

// One cuBLASLt GEMM, descriptors and first heuristic algorithm built once.
struct Gemm {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  float beta;
  void run(Lt& lt, const void* a, const void* b, void* d, cudaStream_t s, int ws_index) const {
    const float alpha = 1.0f;
    CHECK_LT(cublasLtMatmul(lt.h, desc, &alpha, a, la, b, lb, &beta, d, lc, d, lc, &algo, lt.ws[ws_index],
                            lt.ws_size, s));
  }
};

Gemm make_gemm(Lt& lt, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, int64_t lda,
               int64_t ldb, int64_t ldc, cudaDataType_t d_type, float beta) {
  Gemm g{};
  g.beta = beta;
  CHECK_LT(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CHECK_LT(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const bool a_t = ta == CUBLAS_OP_T, b_t = tb == CUBLAS_OP_T;
  CHECK_LT(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_16BF, a_t ? k : m, a_t ? m : k, lda));
  CHECK_LT(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_16BF, b_t ? n : k, b_t ? k : n, ldb));
  CHECK_LT(cublasLtMatrixLayoutCreate(&g.lc, d_type, m, n, ldc));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.ws_size,
                                                sizeof(lt.ws_size)));
  cublasLtMatmulHeuristicResult_t res{};
  int count = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt.h, g.desc, g.la, g.lb, g.lc, g.lc, pref, 1, &res, &count));
  if (count < 1) {
    std::fprintf(stderr, "no algorithm for %lld x %lld x %lld\n", (long long)m, (long long)n, (long long)k);
    std::exit(1);
  }
  g.algo = res.algo;
  return g;
}

// A step of a layer's backward: a linear layer's two gradients, or a memory-bound op.
struct Step {
  bool linear = false;
  Gemm dgrad, wgrad;        // linear: dx = dout·W (main stream); dW += doutᵀ·x (main or side)
  int64_t colsum_bytes = 0;  // linear: the bias gradient's read of dout (with the weight gradient)
  int64_t in_bytes = 0, out_bytes = 0;  // memory-bound op (main stream)
};

// The three GEMMs' layouts as in src/biofm/ops/gemm/cuda.cu (row-major [N, I] -> [N, O]).
Step linear(Lt& lt, int64_t N, int64_t I, int64_t O, bool bias) {
  Step s;
  s.linear = true;
  s.dgrad = make_gemm(lt, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, I, O, I, CUDA_R_16BF, 0.0f);
  s.wgrad = make_gemm(lt, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, I, O, I, CUDA_R_32F, 1.0f);
  s.colsum_bytes = bias ? N * O * 2 : 0;
  return s;
}
Step traffic(int64_t in_bytes, int64_t out_bytes) {
  Step s;
  s.in_bytes = in_bytes;
  s.out_bytes = out_bytes;
  return s;
}

struct Buffers {
  void *a, *b, *d, *dw, *mem_in, *mem_out;
};

void run_traffic(const Buffers& buf, int64_t in_bytes, int64_t out_bytes, cudaStream_t s) {
  traffic_kernel<<<132 * 8, 256, 0, s>>>(static_cast<const uint4*>(buf.mem_in), in_bytes / 16,
                                         static_cast<uint4*>(buf.mem_out), out_bytes / 16);
}

// One backward over `layers` layers; side == nullptr: everything on main.
void backward(Lt& lt, const std::vector<Step>& layer, int layers, const Buffers& buf, cudaStream_t main,
              cudaStream_t side, std::vector<cudaEvent_t>& ready, cudaEvent_t side_done) {
  size_t e = 0;
  for (int l = 0; l < layers; ++l)
    for (const Step& s : layer) {
      if (!s.linear) {
        run_traffic(buf, s.in_bytes, s.out_bytes, main);
        continue;
      }
      cudaStream_t ws = main;
      if (side) {
        CHECK_CUDA(cudaEventRecord(ready[e], main));
        CHECK_CUDA(cudaStreamWaitEvent(side, ready[e], 0));
        ++e;
        ws = side;
      }
      // Side mode: the weight gradient is queued first so that it starts with the input gradient.
      s.wgrad.run(lt, buf.a, buf.b, buf.dw, ws, side ? 1 : 0);
      if (s.colsum_bytes) run_traffic(buf, s.colsum_bytes, 0, ws);
      s.dgrad.run(lt, buf.a, buf.b, buf.d, main, 0);
    }
  if (side) {
    CHECK_CUDA(cudaEventRecord(side_done, side));
    CHECK_CUDA(cudaStreamWaitEvent(main, side_done, 0));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 6;
  Lt lt;
  CHECK_LT(cublasLtCreate(&lt.h));
  CHECK_CUDA(cudaMalloc(&lt.ws[0], lt.ws_size));
  CHECK_CUDA(cudaMalloc(&lt.ws[1], lt.ws_size));
  Buffers buf{};
  const size_t big = size_t(16384) * 16384 * 2;  // 512 MiB each: the largest operand
  for (void** p : {&buf.a, &buf.b, &buf.d, &buf.dw, &buf.mem_in, &buf.mem_out}) CHECK_CUDA(cudaMalloc(p, big));
  {
    // Random bf16 operands in about ±1 (zeros would draw less power and flatter the GEMMs).
    std::vector<uint16_t> h(size_t(32) << 20);
    uint32_t x = 12345;
    for (auto& v : h) {
      x = x * 1664525u + 1013904223u;
      v = uint16_t(0x3c00u + ((x >> 16) & 0x7fu)) | uint16_t((x >> 8) & 0x8000u);
    }
    for (void* p : {buf.a, buf.b, buf.mem_in})
      for (size_t off = 0; off < big; off += h.size() * 2)
        CHECK_CUDA(cudaMemcpy(static_cast<char*>(p) + off, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  CHECK_CUDA(cudaMemset(buf.dw, 0, big));

  struct Model {
    const char* name;
    int layers;
    int64_t tokens;
    std::vector<Step> layer;
  };
  const int64_t N = 16384, H = 1280, F = 5120;  // ESM-2 650M, 16k-token batch
  const int64_t n = 8192, h = 2048, f = 8192, kv = 512;  // Llama 1B, one window
  std::vector<Model> models = {
      {"ESM-2 650M layer backward x33, 16384 tokens",
       33,
       N,
       {linear(lt, N, F, H, true),          // fc2
        traffic(N * F * 2 * 2, N * F * 2),  // GELU gradient (pre and d(act) in, d(pre) out)
        linear(lt, N, H, F, true),          // fc1
        traffic(N * H * 2 * 2, N * H * 2),  // LayerNorm backward
        linear(lt, N, H, H, true),          // attention output
        traffic(N * 3 * H * 2, N * 3 * H * 2),  // rope backward on the q|k|v gradient
        linear(lt, N, H, 3 * H, true),      // q|k|v
        traffic(N * H * 2 * 2, N * H * 2)}},  // LayerNorm backward
      {"Llama 1B layer backward x16, 8192 tokens",
       16,
       n,
       {linear(lt, n, f, h, false),               // down
        traffic(n * 2 * f * 2 * 2, n * 2 * f * 2),  // SwiGLU gradient
        linear(lt, n, h, 2 * f, false),           // gate|up
        traffic(n * h * 2 * 2, n * h * 2),        // RMSNorm backward
        linear(lt, n, h, h, false),               // attention output
        traffic(n * (h + kv) * 2, n * (h + kv) * 2),  // rope backward
        linear(lt, n, h, h + 2 * kv, false),      // q|k|v
        traffic(n * h * 2 * 2, n * h * 2)}},      // RMSNorm backward
  };

  cudaStream_t main_s, side_s;
  int lo = 0, hi = 0;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CHECK_CUDA(cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&side_s, cudaStreamNonBlocking));
  // Priorities: the default (main_s, side_s) is the lowest; mode 2 raises the main stream so
  // that the chain of input gradients takes freed SMs first.
  cudaStream_t main_high;
  CHECK_CUDA(cudaStreamCreateWithPriority(&main_high, cudaStreamNonBlocking, hi));
  std::vector<cudaEvent_t> ready(64 * 4);
  for (auto& e : ready) CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaEvent_t side_done, t0, t1;
  CHECK_CUDA(cudaEventCreateWithFlags(&side_done, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));

  for (const Model& m : models) {
    std::printf("%s\n", m.name);
    const char* mode_name[3] = {"one stream", "weight gradients on a side stream", "side stream, main high priority"};
    std::vector<double> sum(3, 0.0);
    std::vector<int> cnt(3, 0);
    for (int r = 0; r < rounds; ++r)
      for (int mode = 0; mode < 3; ++mode) {
        cudaStream_t side = mode == 0 ? nullptr : side_s;
        cudaStream_t main = mode == 2 ? main_high : main_s;
        // Two backward passes per timing: the first warms the GPU into its power-capped clocks.
        backward(lt, m.layer, m.layers, buf, main, side, ready, side_done);
        CHECK_CUDA(cudaEventRecord(t0, main));
        for (int rep = 0; rep < 3; ++rep) backward(lt, m.layer, m.layers, buf, main, side, ready, side_done);
        CHECK_CUDA(cudaEventRecord(t1, main));
        CHECK_CUDA(cudaEventSynchronize(t1));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
        ms /= 3;
        std::printf("  round %d  %-36s %8.2f ms per backward\n", r, mode_name[mode], ms);
        if (r > 0) sum[size_t(mode)] += ms, ++cnt[size_t(mode)];
      }
    for (int mode = 0; mode < 3; ++mode)
      std::printf("  mean of rounds 1..%d  %-36s %8.2f ms (%+.1f%% against one stream)\n", rounds - 1,
                  mode_name[mode], sum[size_t(mode)] / cnt[size_t(mode)],
                  100.0 * (sum[size_t(mode)] / cnt[size_t(mode)] - sum[0] / cnt[0]) / (sum[0] / cnt[0]));
  }
  return 0;
}
