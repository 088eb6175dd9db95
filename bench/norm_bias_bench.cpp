// The bandwidth-bound ops around the GEMMs of a training step, on their own (bf16, 16k-token
// micro batch): LayerNorm / RMSNorm forward and backward for each chunks-per-thread choice of
// the norm kernels (ops.norm_chunks; "auto" is what runs by default), and the bias gradient of
// a linear layer's backward by both routes (cuBLASLt's BGRADB epilogue vs the plain weight-
// gradient GEMM plus our column-sum kernel, ops.gemm_fused_bgrad), at the ESM-2 650M shapes and
// the 33-wide vocabulary of its LM head.
//
// Standalone program (no CMake target), built like bench/mlp_gelu_bench.cpp:
//   g++ -std=c++20 -O2 -DBIOFM_WITH_CUDA=1 -Isrc -I/usr/local/cuda/include
//       bench/norm_bias_bench.cpp build/libbiofm_lib.a <biofm_lib's link libraries> -o norm_bias_bench
// Run on the GPU machine: ./norm_bias_bench [iterations]   (default 50). CUDA-event timing on the
// op stream after a warm-up; GB/s counts the bytes each op must move at least once.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "biofm/core/cuda_context.h"
#include "biofm/core/rng.h"
#include "biofm/core/tensor.h"
#include "biofm/ops/gemm/op.h"
#include "biofm/ops/norm/op.h"
#include "biofm/ops/options.h"
#include "op_bench_util.h"

using namespace biofm;
using bench::random_gpu;

namespace {

template <class Fn>
double time_us(int iters, Fn&& fn) {
  return 1000.0 * bench::time_ms(iters, fn);
}

void set_options(int norm_chunks, bool fused_bgrad) {
  ops::OpOptions o = ops::op_options();
  o.norm_chunks = norm_chunks;
  o.gemm_fused_bgrad = fused_bgrad;
  ops::set_op_options(o);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even if the run is cut short
  const int64_t N = 16384;
  std::printf("norms, [%lld, C] bf16, bf16 weights; us per call (GB/s) for ops.norm_chunks = auto 1 2 4 8\n",
              (long long)N);
  for (int64_t C : {640, 1280, 2048}) {  // (run A of session 14 covered 480 to 5120)
    const Tensor x = random_gpu({N, C}, 1, 1.0f), dout = random_gpu({N, C}, 2, 1.0f),
                 dres = random_gpu({N, C}, 3, 1.0f);
    const Tensor w = random_gpu({C}, 4, 0.1f), b = random_gpu({C}, 5, 0.1f);
    Tensor y = Tensor::empty({N, C}, DType::BF16, Device::CUDA), dx = Tensor::empty({N, C}, DType::BF16, Device::CUDA);
    Tensor mean = Tensor::empty({N}, DType::F32, Device::CUDA), rstd = Tensor::empty({N}, DType::F32, Device::CUDA);
    Tensor dw = Tensor::zeros({C}, DType::F32, Device::CUDA), db = Tensor::zeros({C}, DType::F32, Device::CUDA);
    ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f);
    const double act = double(N) * double(C) * 2.0;
    struct Pass {
      const char* name;
      double bytes;
      int max_chunks;
    };
    auto row = [&](const Pass& p, auto&& fn) {
      std::printf("C %5lld %-22s", (long long)C, p.name);
      for (int ch : {0, 1, 2, 4, 8}) {
        if (ch > p.max_chunks) continue;
        set_options(ch, true);
        const double us = time_us(iters, fn);
        std::printf(" %7.1f (%4.0f)", us, p.bytes / us / 1e3);
      }
      std::printf("\n");
    };
    row({"layernorm fwd", 2 * act, 8}, [&] { ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f); });
    row({"layernorm bwd +dres", 4 * act, 4}, [&] { ops::layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, dres); });
    Tensor none;
    row({"rmsnorm fwd", 2 * act, 8}, [&] { ops::rmsnorm_forward(y, rstd, x, w, 1e-5f); });
    row({"rmsnorm bwd +dres", 4 * act, 4}, [&] { ops::rmsnorm_backward(dx, dw, dout, x, w, rstd, dres); });
  }
  set_options(0, true);

  std::printf("\nlinear backward, weight and bias gradients (dx not wanted), [%lld tokens]: us per call\n",
              (long long)N);
  std::printf("%-24s %12s %12s %12s %12s\n", "shape (in -> out)", "dw only", "dw+db BGRADB", "dw+db colsum",
              "colsum alone");
  struct Lin {
    const char* name;
    int64_t I, O;
  };
  for (Lin l : {Lin{"qkv 1280 -> 3840", 1280, 3840}, Lin{"out 1280 -> 1280", 1280, 1280},
                Lin{"fc1 1280 -> 5120", 1280, 5120}, Lin{"fc2 5120 -> 1280", 5120, 1280},
                Lin{"decoder 1280 -> 33", 1280, 33}, Lin{"150M qkv 640 -> 1920", 640, 1920},
                Lin{"150M out 640 -> 640", 640, 640}, Lin{"150M fc1 640 -> 2560", 640, 2560},
                Lin{"150M fc2 2560 -> 640", 2560, 640}}) {
    const Tensor x = random_gpu({N, l.I}, 6, 1.0f), dout = random_gpu({N, l.O}, 7, 0.1f);
    const Tensor w = random_gpu({l.O, l.I}, 8, 0.02f);
    Tensor dw = Tensor::zeros({l.O, l.I}, DType::F32, Device::CUDA), db = Tensor::zeros({l.O}, DType::F32, Device::CUDA);
    Tensor none, dw_none;
    const double only = time_us(iters, [&] { ops::linear_backward(none, dw, none, dout, x, w); });
    set_options(0, true);
    const double fused = time_us(iters, [&] { ops::linear_backward(none, dw, db, dout, x, w); });
    set_options(0, false);
    const double split = time_us(iters, [&] { ops::linear_backward(none, dw, db, dout, x, w); });
    const double cs = time_us(iters, [&] { ops::linear_backward(none, dw_none, db, dout, x, w); });
    set_options(0, true);
    Tensor dx = Tensor::empty({N, l.I}, DType::BF16, Device::CUDA);
    const double dgrad = time_us(iters, [&] { ops::linear_backward(dx, dw_none, none, dout, x, w); });
    Tensor y = Tensor::empty({N, l.O}, DType::BF16, Device::CUDA);
    const double fwd = time_us(iters, [&] { ops::linear_forward(y, x, w, none); });
    std::printf("%-24s %9.1f us %9.1f us %9.1f us %9.1f us (%4.0f GB/s)   dx %7.1f us, forward %7.1f us\n", l.name,
                only, fused, split, cs, double(N) * double(l.O) * 2.0 / cs / 1e3, dgrad, fwd);
  }
  return 0;
}
