// Does FP8 attention pay on this GPU? Times cuDNN's dense SDPA forward and backward in BF16 and
// in FP8 (E4M3 q/k/v/o/dO, the recipes' `fp8_dpa`) on the same shapes: Llama 1B (32/8 heads,
// head dim 64) and OpenGenome2 7B (32/8, head dim 128) windows of 8192 tokens, causal; and
// ESM-2 650M's short bidirectional sequences (20 heads of 64; 40 sequences of 416 tokens, about
// one 16k-token batch of UniProt proteins, dense: the padded stand-in for its ragged batches).
// Timing only: inputs are random, all scales 1 (the numbers a real recipe computes do not change
// the kernels' speed).
//
// Standalone (cuDNN frontend headers, cuDNN, CUDA runtime):
//   g++ -std=c++20 -O2 -I<frontend include> -I/usr/local/cuda/include bench/fp8_sdpa_probe.cpp \
//       -L/usr/local/cuda/lib -lcudnn -lcudart -lnvrtc -lcuda -o fp8_sdpa_probe
// Run on the GPU machine: ./fp8_sdpa_probe [iterations]   (default 20)
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Shape {
  const char* name;
  int64_t B, S, Hq, Hkv, D;
  bool causal = true;
};

// Device buffer of `bytes` random bytes shaped as the element type asks (small normal values).
void* random_buffer(size_t n, bool fp8, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  void* d = nullptr;
  if (fp8) {
    std::vector<__nv_fp8_e4m3> h(n);
    for (auto& x : h) x = __nv_fp8_e4m3(nd(rng));
    check(cudaMalloc(&d, n), "malloc");
    check(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice), "copy");
  } else {
    std::vector<__nv_bfloat16> h(n);
    for (auto& x : h) x = __float2bfloat16(nd(rng));
    check(cudaMalloc(&d, n * 2), "malloc");
    check(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice), "copy");
  }
  return d;
}

float* device_scalar(float v) {
  float* d = nullptr;
  check(cudaMalloc(&d, sizeof(float)), "malloc");
  check(cudaMemcpy(d, &v, sizeof(float), cudaMemcpyHostToDevice), "copy");
  return d;
}

TensorPtr bshd(fe::graph::Graph& g, const char* name, int64_t uid, const Shape& s, int64_t H) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({s.B, H, s.S, s.D})
                      .set_stride({s.S * H * s.D, s.D, H * s.D, 1}));
}

TensorPtr scalar(fe::graph::Graph& g, const char* name, int64_t uid) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({1, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}

enum : int64_t { Q = 1, K, V, O, DO, STATS, DQ, DK, DV, SCALE_BASE = 100 };

// Builds the forward or backward graph; returns null with a message when cuDNN refuses it.
std::shared_ptr<fe::graph::Graph> build(cudnnHandle_t h, const Shape& s, bool fp8, bool backward,
                                        std::vector<int64_t>* scalar_uids, int64_t* workspace) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fp8 ? fe::DataType_t::FP8_E4M3 : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const float attn_scale = 1.0f / std::sqrt(float(s.D));
  auto q = bshd(*g, "Q", Q, s, s.Hq), k = bshd(*g, "K", K, s, s.Hkv), v = bshd(*g, "V", V, s, s.Hkv);
  int64_t next = SCALE_BASE;
  auto sc = [&](const char* n) {
    scalar_uids->push_back(next);
    return scalar(*g, n, next++);
  };
  auto stats_attrs = [&](fe::graph::Tensor_attributes& t) {
    t.set_uid(STATS).set_data_type(fe::DataType_t::FLOAT).set_dim({s.B, s.Hq, s.S, 1}).set_stride({s.Hq * s.S, s.S, 1, 1});
  };
  auto out_bshd = [&](const TensorPtr& t, int64_t uid, int64_t H) {
    t->set_output(true).set_uid(uid).set_dim({s.B, H, s.S, s.D}).set_stride({s.S * H * s.D, s.D, H * s.D, 1});
  };
  auto amax = [&](const TensorPtr& t) {
    scalar_uids->push_back(next);
    t->set_output(true).set_uid(next++).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
  };
  if (!backward) {
    TensorPtr o, stats;
    if (fp8) {
      auto opts = fe::graph::SDPA_fp8_attributes().set_name("fp8_fwd").set_generate_stats(true).set_causal_mask(s.causal).set_attn_scale(attn_scale);
      auto dq_ = sc("descale_q"), dk_ = sc("descale_k"), dv_ = sc("descale_v"), ds_ = sc("descale_s"), ss_ = sc("scale_s"),
           so_ = sc("scale_o");
      auto r = g->sdpa_fp8(q, k, v, dq_, dk_, dv_, ds_, ss_, so_, opts);
      o = r[0], stats = r[1];
      amax(r[2]);
      amax(r[3]);
    } else {
      auto opts = fe::graph::SDPA_attributes().set_name("bf16_fwd").set_generate_stats(true).set_causal_mask(s.causal).set_attn_scale(attn_scale);
      auto r = g->sdpa(q, k, v, opts);
      o = r[0], stats = r[1];
    }
    out_bshd(o, O, s.Hq);
    stats->set_output(true);
    stats_attrs(*stats);
  } else {
    auto o = bshd(*g, "O", O, s, s.Hq), dO = bshd(*g, "dO", DO, s, s.Hq);
    auto stats = g->tensor(fe::graph::Tensor_attributes().set_name("Stats"));
    stats_attrs(*stats);
    TensorPtr dq, dk, dv;
    if (fp8) {
      auto opts = fe::graph::SDPA_fp8_backward_attributes().set_name("fp8_bwd").set_causal_mask(s.causal).set_attn_scale(attn_scale);
      auto dq_ = sc("descale_q"), dk_ = sc("descale_k"), dv_ = sc("descale_v"), do_ = sc("descale_o"),
           ddo_ = sc("descale_dO"), ds_ = sc("descale_s"), ddp_ = sc("descale_dP"), ss_ = sc("scale_s"),
           sdq_ = sc("scale_dQ"), sdk_ = sc("scale_dK"), sdv_ = sc("scale_dV"), sdp_ = sc("scale_dP");
      auto r = g->sdpa_fp8_backward(q, k, v, o, dO, stats, dq_, dk_, dv_, do_, ddo_, ds_, ddp_, ss_, sdq_, sdk_, sdv_, sdp_, opts);
      dq = r[0], dk = r[1], dv = r[2];
      for (int i = 3; i < 7; ++i) amax(r[size_t(i)]);
    } else {
      auto opts = fe::graph::SDPA_backward_attributes().set_name("bf16_bwd").set_causal_mask(s.causal).set_attn_scale(attn_scale);
      auto r = g->sdpa_backward(q, k, v, o, dO, stats, opts);
      dq = r[0], dk = r[1], dv = r[2];
    }
    out_bshd(dq, DQ, s.Hq);
    out_bshd(dk, DK, s.Hkv);
    out_bshd(dv, DV, s.Hkv);
  }
  auto step = [&](fe::error_t e, const char* what) {
    if (!e.is_good()) std::printf("    %s %s %s: %s: %s\n", s.name, fp8 ? "fp8" : "bf16", backward ? "bwd" : "fwd", what, e.get_message().c_str());
    return e.is_good();
  };
  if (!step(g->validate(), "validate") || !step(g->build_operation_graph(h), "build_operation_graph") ||
      !step(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans") ||
      !step(g->check_support(h), "check_support") || !step(g->build_plans(h), "build_plans") ||
      !step(g->get_workspace_size(*workspace), "workspace"))
    return nullptr;
  return g;
}

void run(cudnnHandle_t h, const Shape& s, bool fp8, int iters) {
  const size_t nq = size_t(s.B * s.S * s.Hq * s.D), nkv = size_t(s.B * s.S * s.Hkv * s.D);
  const size_t el = fp8 ? 1 : 2;
  void* q = random_buffer(nq, fp8, 1);
  void* k = random_buffer(nkv, fp8, 2);
  void* v = random_buffer(nkv, fp8, 3);
  void* dO = random_buffer(nq, fp8, 4);
  void *o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr, *stats = nullptr;
  check(cudaMalloc(&o, nq * el), "malloc");
  check(cudaMalloc(&dq, nq * el), "malloc");
  check(cudaMalloc(&dk, nkv * el), "malloc");
  check(cudaMalloc(&dv, nkv * el), "malloc");
  check(cudaMalloc(&stats, size_t(s.B * s.Hq * s.S) * 4), "malloc");
  double ms[2] = {0, 0};
  for (int backward = 0; backward < 2; ++backward) {
    std::vector<int64_t> uids;
    int64_t ws = 0;
    auto g = build(h, s, fp8, backward, &uids, &ws);
    if (!g) return;
    void* work = nullptr;
    if (ws > 0) check(cudaMalloc(&work, size_t(ws)), "malloc");
    std::unordered_map<int64_t, void*> pack = {{Q, q}, {K, k}, {V, v}, {O, o}, {STATS, stats}};
    if (backward) pack.insert({{DO, dO}, {DQ, dq}, {DK, dk}, {DV, dv}});
    std::vector<float*> scalars;
    for (int64_t u : uids) pack[u] = scalars.emplace_back(device_scalar(1.0f));
    for (int i = 0; i < 3; ++i)
      if (!g->execute(h, pack, work).is_good()) {
        std::printf("    %s execute failed\n", s.name);
        return;
      }
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "event");
    check(cudaEventCreate(&e1), "event");
    check(cudaEventRecord(e0), "record");
    for (int i = 0; i < iters; ++i) (void)g->execute(h, pack, work);
    check(cudaEventRecord(e1), "record");
    check(cudaEventSynchronize(e1), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, e0, e1), "elapsed");
    ms[backward] = double(t) / iters;
    for (float* p : scalars) cudaFree(p);
    if (work) cudaFree(work);
  }
  const double flops = 4.0 * double(s.B) * double(s.S) * double(s.S) * double(s.Hq) * double(s.D) * (s.causal ? 0.5 : 1.0);
  std::printf("%-12s %-4s B=%lld S=%lld Hq=%lld Hkv=%lld D=%lld %s  fwd %7.3f ms %6.1f TFLOP/s   bwd %7.3f ms %6.1f TFLOP/s\n",
              s.name, fp8 ? "fp8" : "bf16", (long long)s.B, (long long)s.S, (long long)s.Hq, (long long)s.Hkv,
              (long long)s.D, s.causal ? "causal" : "full", ms[0], flops / ms[0] / 1e9, ms[1], 2.5 * flops / ms[1] / 1e9);
  std::fflush(stdout);
  for (void* p : {q, k, v, dO, o, dq, dk, dv, stats}) cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  cudnnHandle_t h;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate failed\n");
    return 1;
  }
  std::printf("cuDNN %zu\n", cudnnGetVersion());
  const std::vector<Shape> shapes = {{"llama-1B", 1, 8192, 32, 8, 64},
                                     {"llama-1B-mha", 1, 8192, 32, 32, 64},
                                     {"og2-7B", 1, 8192, 32, 8, 128},
                                     {"og2-7B-mha", 1, 8192, 32, 32, 128},
                                     {"esm2-650M", 40, 416, 20, 20, 64, false}};
  for (const Shape& s : shapes)
    for (bool fp8 : {false, true}) run(h, s, fp8, iters);
  cudnnDestroy(h);
  return 0;
}
