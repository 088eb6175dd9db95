// Probe (session 24): can AdamW's memory traffic (30 B per parameter at the ESM-2 650M size) hide
// under the next forward pass's GEMMs when it runs on a second stream, each layer of the forward
// waiting for its chunk? Standalone: nvcc -std=c++17 -O2 -arch=sm_90a bench/optimizer_overlap_probe.cu -lcublasLt
// Result (H100, docs/PERFORMANCE.md session 24): no (38.0 vs 38.5 ms; the GEMMs hold every SM).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x)                                                           \
  do {                                                                  \
    cudaError_t e_ = (x);                                               \
    if (e_ != cudaSuccess) {                                            \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)
#define CL(x)                                               \
  do {                                                      \
    cublasStatus_t s_ = (x);                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                      \
      printf("%s:%d lt %d\n", __FILE__, __LINE__, int(s_)); \
      exit(1);                                              \
    }                                                       \
  } while (0)
__global__ void adamw_like(const float4* p, const float4* m, const float4* v, const float4* g, float4* po, float4* mo,
                           float4* vo, uint2* c, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float4 a = p[i], b = m[i], d = v[i], e = g[i];
    b.x = 0.9f * b.x + 0.1f * e.x;
    b.y = 0.9f * b.y + 0.1f * e.y;
    b.z = 0.9f * b.z + 0.1f * e.z;
    b.w = 0.9f * b.w + 0.1f * e.w;
    d.x = 0.99f * d.x + 0.01f * e.x * e.x;
    d.y = 0.99f * d.y + 0.01f * e.y * e.y;
    d.z = 0.99f * d.z + 0.01f * e.z * e.z;
    d.w = 0.99f * d.w + 0.01f * e.w * e.w;
    a.x -= 1e-4f * b.x * rsqrtf(d.x + 1e-8f);
    a.y -= 1e-4f * b.y * rsqrtf(d.y + 1e-8f);
    a.z -= 1e-4f * b.z * rsqrtf(d.z + 1e-8f);
    a.w -= 1e-4f * b.w * rsqrtf(d.w + 1e-8f);
    po[i] = a;
    mo[i] = b;
    vo[i] = d;
    c[i] = make_uint2(__float_as_uint(a.x), __float_as_uint(a.z));
  }
}
__global__ void traffic(const uint4* in, int64_t n_in, uint4* out, int64_t n_out) {
  uint4 acc{0, 0, 0, 0};
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n_in; i += int64_t(gridDim.x) * blockDim.x) {
    uint4 v = __ldcs(in + i);
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
    if (i < n_out) out[i] = acc;
  }
}
struct G {
  cublasLtMatmulDesc_t d;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
};
cublasLtHandle_t lt;
void* ws[2];
size_t wss = 64 << 20;
G mk(int64_t m, int64_t n, int64_t k) {  // forward: out[N,O] = x[N,I] W[O,I]^T as in cuda.cu: T,N, m=O n=N k=I
  G g;
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CL(cublasLtMatmulDescCreate(&g.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CL(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CL(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CL(cublasLtMatrixLayoutCreate(&g.a, CUDA_R_16BF, k, m, k));
  CL(cublasLtMatrixLayoutCreate(&g.b, CUDA_R_16BF, k, n, k));
  CL(cublasLtMatrixLayoutCreate(&g.c, CUDA_R_16BF, m, n, m));
  cublasLtMatmulPreference_t p;
  CL(cublasLtMatmulPreferenceCreate(&p));
  CL(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss, sizeof wss));
  cublasLtMatmulHeuristicResult_t r{};
  int cnt = 0;
  CL(cublasLtMatmulAlgoGetHeuristic(lt, g.d, g.a, g.b, g.c, g.c, p, 1, &r, &cnt));
  g.algo = r.algo;
  return g;
}
int main() {
  CL(cublasLtCreate(&lt));
  CK(cudaMalloc(&ws[0], wss));
  CK(cudaMalloc(&ws[1], wss));
  const int64_t N = 16384, H = 1280, F = 5120, P = 651000000;
  void *A, *B, *D, *mi, *mo;
  size_t big = size_t(N) * F * 2 * 2;
  for (void** q : {&A, &B, &D, &mi, &mo}) {
    CK(cudaMalloc(q, big));
    CK(cudaMemset(*q, 0x3c, big));
  }
  float *pp, *m, *v, *g, *po, *mo2, *vo;
  uint2* c;
  for (float** q : {&pp, &m, &v, &g}) {
    CK(cudaMalloc(q, size_t(P) * 4));
    CK(cudaMemset(*q, 0x3c, size_t(P) * 4));
  }
  po = pp;
  mo2 = m;
  vo = v;
  CK(cudaMalloc(&c, size_t(P) * 2));
  G qkv = mk(3 * H, N, H), out = mk(H, N, H), fc1 = mk(F, N, H), fc2 = mk(H, N, F);
  cudaStream_t s0, s1;
  CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  const int L = 33;
  std::vector<cudaEvent_t> ev(L + 1);
  for (auto& e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaEvent_t start, t0, t1;
  CK(cudaEventCreateWithFlags(&start, cudaEventDisableTiming));
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  float one = 1, zero = 0;
  auto gemm = [&](G& g, cudaStream_t s) {
    CL(cublasLtMatmul(lt, g.d, &one, A, g.a, B, g.b, &zero, D, g.c, D, g.c, &g.algo, ws[0], wss, s));
  };
  auto mem = [&](int64_t r, int64_t w, cudaStream_t s) {
    traffic<<<132 * 8, 256, 0, s>>>((const uint4*)mi, r / 16, (uint4*)mo, w / 16);
  };
  auto adam = [&](int64_t a, int64_t b, cudaStream_t s) {
    int64_t n4 = (b - a) / 4;
    adamw_like<<<132 * 8, 256, 0, s>>>((const float4*)(pp + a), (const float4*)(m + a), (const float4*)(v + a),
                                       (const float4*)(g + a), (float4*)(po + a), (float4*)(mo2 + a), (float4*)(vo + a),
                                       c + a / 4 * 2 / 2, n4);
  };
  auto forward_layer = [&](cudaStream_t s) {
    mem(N * H * 2, N * H * 2, s);
    gemm(qkv, s);
    mem(N * 3 * H * 2, N * 3 * H * 2, s);
    gemm(out, s);
    mem(N * H * 2, N * H * 2, s);
    gemm(fc1, s);
    gemm(fc2, s);
  };
  const int64_t chunk = P / (L + 1) / 4 * 4;
  for (int round = 0; round < 5; ++round)
    for (int mode = 0; mode < 3; ++mode) {
      // mode 0: AdamW then forward, one stream; 1: AdamW chunks on s1, forward layer l waits for chunk l; 2: forward
      // only
      for (int rep = 0; rep < 4; ++rep) {
        if (rep == 1) CK(cudaEventRecord(t0, s0));
        if (mode == 0) {
          for (int l = 0; l <= L; ++l) adam(l * chunk, (l + 1) * chunk, s0);
          for (int l = 0; l < L; ++l) forward_layer(s0);
        }
        if (mode == 1) {
          CK(cudaEventRecord(start, s0));
          CK(cudaStreamWaitEvent(s1, start, 0));
          for (int l = 0; l <= L; ++l) {
            adam(l * chunk, (l + 1) * chunk, s1);
            CK(cudaEventRecord(ev[l], s1));
          }
          for (int l = 0; l < L; ++l) {
            CK(cudaStreamWaitEvent(s0, ev[l], 0));
            forward_layer(s0);
          }
          CK(cudaStreamWaitEvent(s0, ev[L], 0));
        }
        if (mode == 2)
          for (int l = 0; l < L; ++l) forward_layer(s0);
      }
      CK(cudaEventRecord(t1, s0));
      CK(cudaEventSynchronize(t1));
      float ms;
      CK(cudaEventElapsedTime(&ms, t0, t1));
      const char* nm[3] = {"AdamW then forward, one stream", "AdamW beside the forward", "forward alone"};
      printf("round %d %-34s %7.2f ms\n", round, nm[mode], ms / 3);
    }
  // AdamW alone
  CK(cudaEventRecord(t0, s0));
  for (int rep = 0; rep < 3; ++rep)
    for (int l = 0; l <= L; ++l) adam(l * chunk, (l + 1) * chunk, s0);
  CK(cudaEventRecord(t1, s0));
  CK(cudaEventSynchronize(t1));
  float ms;
  CK(cudaEventElapsedTime(&ms, t0, t1));
  printf("AdamW alone %.2f ms\n", ms / 3);
}
