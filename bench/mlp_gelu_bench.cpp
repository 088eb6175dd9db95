// The ESM-2 MLP's GEMM + exact GELU on the GPU: the fused CUTLASS kernels against the unfused
// pair (cuBLASLt GEMM with its bias epilogue + the GELU kernels), for the MLP shapes of ESM-2
// 35M / 150M / 650M / 3B at a 16k-token micro batch (3B: beyond the fused kernels' range, both
// columns run the pair).
//
// Standalone program (no CMake target), built like bench/attention_bench.cpp:
//   g++ -std=c++20 -O2 -DBIOFM_WITH_CUDA=1 -Isrc -I/usr/local/cuda/include
//       bench/mlp_gelu_bench.cpp build/libbiofm_lib.a <biofm_lib's link libraries> -o mlp_gelu_bench
// Run on the GPU machine: ./mlp_gelu_bench [iterations]   (default 50). Times with CUDA events on
// the op stream after a warm-up; TFLOP/s counts the GEMM's 2·N·H·F only.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "biofm/core/cuda_context.h"
#include "biofm/core/rng.h"
#include "biofm/core/tensor.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/options.h"
#include "op_bench_util.h"

using namespace biofm;
using bench::random_gpu;
using bench::time_ms;

namespace {

void set_fused(bool on) {
  ops::OpOptions o = ops::op_options();
  o.gemm_fused_gelu = on;
  ops::set_op_options(o);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  struct Shape3 {
    const char* name;
    int64_t N, H, F;
  };
  std::printf("%-10s %-22s %10s %10s %8s\n", "shape", "pass", "unfused", "fused", "speedup");
  for (Shape3 s : {Shape3{"35M", 16384, 480, 1920}, Shape3{"150M", 16384, 640, 2560},
                   Shape3{"650M", 16384, 1280, 5120}, Shape3{"650M/4k", 4096, 1280, 5120},
                   Shape3{"3B", 16384, 2560, 10240}}) {
    const Tensor x = random_gpu({s.N, s.H}, 1, 1.0f), w1 = random_gpu({s.F, s.H}, 2, 0.03f);
    const Tensor b1 = random_gpu({s.F}, 3, 0.1f), w2 = random_gpu({s.H, s.F}, 4, 0.02f);
    const Tensor dout = random_gpu({s.N, s.H}, 5, 1.0f);
    Tensor act = Tensor::empty({s.N, s.F}, DType::BF16, Device::CUDA);
    Tensor pre = Tensor::empty({s.N, s.F}, DType::BF16, Device::CUDA);
    Tensor dpre = Tensor::empty({s.N, s.F}, DType::BF16, Device::CUDA), none;
    const double flop = 2.0 * double(s.N) * double(s.H) * double(s.F);
    auto row = [&](const char* pass, auto&& fn) {
      set_fused(false);
      const double a = time_ms(iters, fn);
      set_fused(true);
      const int64_t calls = ops::cuda::gemm_gelu_fused_calls();
      const double b = time_ms(iters, fn);
      const bool fused = ops::cuda::gemm_gelu_fused_calls() > calls;
      std::printf("%-10s %-22s %7.3f ms %7.3f ms %7.2fx   (%5.0f -> %5.0f TFLOP/s)%s\n", s.name, pass, a, b, a / b,
                  flop / a / 1e9, flop / b / 1e9, fused ? "" : "  [not fused: unfused both]");
    };
    row("forward (act + pre)", [&] { ops::linear_gelu_forward(act, pre, x, w1, b1); });
    row("forward (act only)", [&] { ops::linear_gelu_forward(act, none, x, w1, b1); });
    row("backward dpre", [&] { ops::linear_dgelu_backward(dpre, dout, w2, pre); });
  }
  // The fused kernels' persistent tile order at the 650M shape (ops.gemm_fused_swizzle /
  // gemm_fused_raster), next to cuBLASLt's plain GEMM of the same shape (no GELU, no bias).
  {
    const int64_t N = 16384, H = 1280, F = 5120;
    const Tensor x = random_gpu({N, H}, 1, 1.0f), w1 = random_gpu({F, H}, 2, 0.03f), b1 = random_gpu({F}, 3, 0.1f);
    const Tensor w2 = random_gpu({H, F}, 4, 0.02f), dout = random_gpu({N, H}, 5, 1.0f);
    Tensor act = Tensor::empty({N, F}, DType::BF16, Device::CUDA), pre = Tensor::empty({N, F}, DType::BF16, Device::CUDA);
    Tensor dpre = Tensor::empty({N, F}, DType::BF16, Device::CUDA), none;
    const double flop = 2.0 * double(N) * double(H) * double(F);
    set_fused(false);
    const double g = time_ms(iters, [&] { ops::linear_forward(pre, x, w1, none, none); });
    std::printf("\n650M tile order (ms; cuBLASLt GEMM alone %.3f ms, %.0f TFLOP/s)\n", g, flop / g / 1e9);
    std::printf("%8s %7s %12s %12s %12s\n", "swizzle", "raster", "fwd+pre", "fwd act", "bwd dpre");
    set_fused(true);
    for (int raster : {0, 1, 2})
      for (int swizzle : {1, 2, 4, 8}) {
        ops::OpOptions o = ops::op_options();
        o.gemm_fused_swizzle = swizzle;
        o.gemm_fused_raster = raster;
        if (raster != 0 && swizzle > 2) continue;  // (measured in session 15 run E: no better)
        ops::set_op_options(o);
        const double a = time_ms(iters, [&] { ops::linear_gelu_forward(act, pre, x, w1, b1); });
        const double b = time_ms(iters, [&] { ops::linear_gelu_forward(act, none, x, w1, b1); });
        const double c = time_ms(iters, [&] { ops::linear_dgelu_backward(dpre, dout, w2, pre); });
        std::printf("%8d %7s %12.3f %12.3f %12.3f\n", swizzle, raster == 0 ? "heur" : raster == 1 ? "M" : "N", a, b, c);
      }
    // (Session 15 run F also tried 128x192 ping-pong tiles for the training kernels: forward
    // 0.384-0.461 ms, backward 0.892-1.053 ms, slower than 128x128; removed.)
    ops::OpOptions o = ops::op_options();
    o.gemm_fused_swizzle = o.gemm_fused_raster = 0;
    ops::set_op_options(o);
  }
  std::printf("fused calls: %lld\n", (long long)ops::cuda::gemm_gelu_fused_calls());
  return 0;
}
