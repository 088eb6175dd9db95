// Attention forward/backward timings on the GPU, per path (cuDNN SDPA and the CUDA fallback).
//
// Standalone program (no CMake target): link it against biofm_lib like the CUDA tests, e.g.
//   g++ -std=c++20 -O2 -DBIOFM_WITH_CUDA=1 -Isrc -I/usr/local/cuda/include
//       bench/attention_bench.cpp build-cuda/libbiofm_lib.a <biofm_lib's link libraries>
//       -o attention_bench
// and run on the GPU machine: ./attention_bench [iterations [cudnn [autotune]]]   (default 20;
// "cudnn": skip the fallback kernels; "autotune": ops.sdpa_autotune, every engine configuration
// timed). Batches of equal power-of-two lengths run on cuDNN twice: dense graph and ragged.
// Each case packs sequences of the given lengths into one THD batch of BF16 (and, for the
// fallback, F32) tensors, warms up (graph builds happen there), then times `iterations`
// forward and backward calls with CUDA events on the op stream. FLOPs counted as in
// FlashAttention: forward 4·Σ L²·Hq·D (halved when causal), backward 2.5× forward.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "biofm/core/cuda_context.h"
#include "biofm/core/rng.h"
#include "biofm/core/tensor.h"
#include "biofm/ops/attention/cudnn_sdpa.h"
#include "biofm/ops/attention/op.h"

using namespace biofm;
namespace ad = biofm::ops::cuda::attention_detail;

namespace {

struct Case {
  const char* name;
  std::vector<int32_t> lens;
  int64_t Hq, Hkv, D;
  bool causal;
};

Tensor random_gpu(const Shape& s, uint64_t seed, DType dt) {
  Tensor t = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng_normal(seed, RngStream::Eval, uint64_t(i), 0);
  return (dt == DType::BF16 ? t.to(DType::BF16) : t).to(Device::CUDA);
}

// UniRef-like protein lengths packed up to `tokens` (deterministic).
std::vector<int32_t> protein_lengths(int64_t tokens, int32_t max_len, uint64_t seed, int order = 0) {
  std::vector<int32_t> lens;
  int64_t used = 0;
  for (uint64_t i = 0; used < tokens; ++i) {
    // log-normal around ~350 residues, clipped to [20, max_len]
    const float z = rng_normal(seed, RngStream::Eval, i, 7);
    int32_t l = int32_t(std::exp(5.85f + 0.6f * z));
    l = std::max(20, std::min(max_len, l));
    l = int32_t(std::min<int64_t>(l, tokens - used));
    lens.push_back(l);
    used += l;
  }
  // order: 0 as drawn, 1 longest first, -1 shortest first (the packing order within a batch)
  if (order > 0) std::sort(lens.begin(), lens.end(), std::greater<int32_t>());
  if (order < 0) std::sort(lens.begin(), lens.end());
  return lens;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void run_case(const Case& c, DType dt, ad::AttentionPath path, int iters) {
  if (path == ad::AttentionPath::Cudnn && !ad::cudnn_sdpa_supported(dt, c.D, c.Hq, c.Hkv)) return;
  int64_t N = 0;
  int32_t max_len = 0;
  std::vector<int32_t> cu{0};
  double flops = 0;
  for (int32_t l : c.lens) {
    N += l;
    cu.push_back(cu.back() + l);
    max_len = std::max(max_len, l);
    flops += 4.0 * double(l) * double(l) * double(c.Hq) * double(c.D) * (c.causal ? 0.5 : 1.0);
  }
  const int64_t B = int64_t(c.lens.size());
  Tensor q = random_gpu({N, c.Hq, c.D}, 1, dt), k = random_gpu({N, c.Hkv, c.D}, 2, dt),
         v = random_gpu({N, c.Hkv, c.D}, 3, dt), dout = random_gpu({N, c.Hq, c.D}, 4, dt);
  Tensor out = Tensor::empty({N, c.Hq, c.D}, dt, Device::CUDA);
  Tensor lse = Tensor::empty({N, c.Hq}, DType::F32, Device::CUDA);
  Tensor dq = Tensor::empty(q.shape(), dt, Device::CUDA), dk = Tensor::empty(k.shape(), dt, Device::CUDA),
         dv = Tensor::empty(v.shape(), dt, Device::CUDA);
  Tensor cut = Tensor::from_i32({B + 1}, cu).to(Device::CUDA);
  Tensor lens = Tensor::from_i32({B}, c.lens).to(Device::CUDA);
  ops::AttentionShape a;
  a.scale = 1.0f / std::sqrt(float(c.D));
  a.causal = c.causal;
  a.max_seqlen = max_len;
  a.uniform = N == B * int64_t(max_len);  // all sequences equally long: dense graphs when ops.sdpa_dense
  const size_t dense_before = ad::cudnn_sdpa_dense_runs();
  cudaStream_t st = cuda_ctx::stream();
  auto fwd = [&] { ad::attention_forward_with(path, out, lse, q, k, v, cut, lens, a); };
  auto bwd = [&] { ad::attention_backward_with(path, dq, dk, dv, dout, q, k, v, out, lse, cut, lens, a); };
  for (int i = 0; i < 3; ++i) {
    fwd();
    bwd();
  }
  check(cudaStreamSynchronize(st), "warm-up");
  cudaEvent_t e0, e1, e2;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  check(cudaEventCreate(&e2), "event");
  check(cudaEventRecord(e0, st), "record");
  for (int i = 0; i < iters; ++i) fwd();
  check(cudaEventRecord(e1, st), "record");
  for (int i = 0; i < iters; ++i) bwd();
  check(cudaEventRecord(e2, st), "record");
  check(cudaEventSynchronize(e2), "sync");
  float ms_f = 0, ms_b = 0;
  check(cudaEventElapsedTime(&ms_f, e0, e1), "elapsed");
  check(cudaEventElapsedTime(&ms_b, e1, e2), "elapsed");
  // Which graph ran: the dense-run counter moved or not (a refused dense graph runs ragged).
  const char* graph = path != ad::AttentionPath::Cudnn ? "" : ad::cudnn_sdpa_dense_runs() > dense_before ? "dense" : "ragged";
  ms_f /= float(iters);
  ms_b /= float(iters);
  std::printf("%-22s %-4s %-8s %-6s B=%-4lld N=%-6lld maxL=%-5d Hq=%-3lld Hkv=%-3lld D=%-3lld %-6s  fwd %8.3f ms %7.1f TFLOP/s   bwd %8.3f ms %7.1f TFLOP/s\n",
              c.name, dtype_name(dt), ops::attention_backend_name(path), graph, (long long)B, (long long)N, max_len,
              (long long)c.Hq, (long long)c.Hkv, (long long)c.D, c.causal ? "causal" : "bidir", ms_f,
              flops / (ms_f * 1e-3) / 1e12, ms_b, 2.5 * flops / (ms_b * 1e-3) / 1e12);
  std::fflush(stdout);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::vector<Case> cases = {
      {"esm2-8M (D16)", protein_lengths(16384, 1024, 1), 20, 20, 16, false},
      {"esm2-35M (D24)", protein_lengths(16384, 1024, 2), 20, 20, 24, false},
      {"esm2-150M (D32)", protein_lengths(16384, 1024, 3), 20, 20, 32, false},
      {"esm2-650M (D64)", protein_lengths(16384, 1024, 4), 20, 20, 64, false},
      {"esm2-3B (D128)", protein_lengths(16384, 1024, 5), 20, 20, 128, false},
      // The same sequences in another order inside the packed batch.
      {"esm2-650M longest 1st", protein_lengths(16384, 1024, 4, 1), 20, 20, 64, false},
      {"esm2-650M shortest 1st", protein_lengths(16384, 1024, 4, -1), 20, 20, 64, false},
      {"esm2-650M seed 6", protein_lengths(16384, 1024, 6), 20, 20, 64, false},
      {"esm2-650M seed 6 long 1st", protein_lengths(16384, 1024, 6, 1), 20, 20, 64, false},
      {"esm2-650M 32k", protein_lengths(32768, 1024, 8), 20, 20, 64, false},
      {"esm2-650M 32k long 1st", protein_lengths(32768, 1024, 8, 1), 20, 20, 64, false},
      // Batch-count buckets: 32 sequences fill their bucket (32), 33 take one of 64 (graph keys
      // round B up to a power of two); same lengths otherwise.
      {"esm2-650M B=32 L=500", std::vector<int32_t>(32, 500), 20, 20, 64, false},
      {"esm2-650M B=33 L=500", std::vector<int32_t>(33, 500), 20, 20, 64, false},
      {"esm2-650M B=48 L=340", std::vector<int32_t>(48, 340), 20, 20, 64, false},
      {"esm2-650M B=64 L=255", std::vector<int32_t>(64, 255), 20, 20, 64, false},
      {"esm2-650M B=65 L=250", std::vector<int32_t>(65, 250), 20, 20, 64, false},
      {"llama-1B 8k (D64)", {8192}, 32, 8, 64, true},
      {"llama-1B 2x8k (D64)", {8192, 8192}, 32, 8, 64, true},
      {"og2-7B 8k (D128)", {8192}, 32, 8, 128, true},
  };
  const bool only_cudnn = argc > 2 && std::string(argv[2]) == "cudnn";
  if (argc > 3 && std::string(argv[3]) == "autotune") {  // time every cuDNN engine configuration per graph
    ops::OpOptions o = ops::op_options();
    o.sdpa_autotune = true;
    ops::set_op_options(o);
  }
  for (const Case& c : cases) {
    run_case(c, DType::BF16, ad::AttentionPath::Cudnn, iters);
    bool uniform = true;
    for (int32_t l : c.lens) uniform = uniform && l == c.lens[0];
    uniform = uniform && c.lens[0] >= 64 && (c.lens[0] & (c.lens[0] - 1)) == 0;
    if (uniform) {  // the same batch on the ragged graph (ops.sdpa_dense off)
      ops::OpOptions o = ops::op_options();
      o.sdpa_dense = false;
      ops::set_op_options(o);
      run_case(c, DType::BF16, ad::AttentionPath::Cudnn, iters);
      o.sdpa_dense = true;
      ops::set_op_options(o);
    }
    if (only_cudnn) continue;
    run_case(c, DType::BF16, ad::AttentionPath::Fallback, iters);
    run_case(c, DType::F32, ad::AttentionPath::Fallback, iters);
  }
  return 0;
}
