// The FP8 quantization kernel on its own (ops::fp8_quantize, bf16 input, amax given as the
// producers give it), at the shapes of an ESM-2 650M FP8 step (16k tokens): forward inputs
// (E4M3, row-major and transposed codes), output gradients (E5M2, both layouts, with the bias
// gradient's column sums) and weights. Session 16 (H100, docs/PERFORMANCE.md): 2.0-2.8 TB/s; a
// variant with two 64 x 64 tiles per block (more loads in flight per thread) was 2-20% slower
// at every shape and 0.7% slower end to end, and was not kept.
//
// Standalone program (no CMake target), built like bench/mlp_gelu_bench.cpp:
//   g++ -std=c++20 -O2 -DBIOFM_WITH_CUDA=1 -Isrc -I/usr/local/cuda/include
//       bench/fp8_quantize_bench.cpp build/libbiofm_lib.a <biofm_lib's link libraries> -o fp8_quantize_bench
// Run on the GPU machine: ./fp8_quantize_bench [iterations]   (default 50). GB/s counts the bytes
// the kernel must move: 2 per element read, 1 per code written.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "biofm/core/cuda_context.h"
#include "biofm/core/tensor.h"
#include "biofm/ops/fp8/op.h"
#include "op_bench_util.h"

using namespace biofm;
using bench::random_gpu;

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  struct Shape2 {
    const char* what;
    int64_t R, C;
    bool row_major, transposed, col_sums;
    ops::Fp8Type type;
  };
  const int64_t N = 16384;
  const Shape2 shapes[] = {
      {"input [N, 1280] (qkv / out / fc1)", N, 1280, true, true, false, ops::Fp8Type::E4M3},
      {"input [N, 5120] (fc2)", N, 5120, true, true, false, ops::Fp8Type::E4M3},
      {"grad [N, 1280] +sums (out / fc2)", N, 1280, true, true, true, ops::Fp8Type::E5M2},
      {"grad [N, 3840] +sums (qkv)", N, 3840, true, true, true, ops::Fp8Type::E5M2},
      {"grad [N, 5120] +sums (fc1)", N, 5120, true, true, true, ops::Fp8Type::E5M2},
      {"weight [5120, 1280]", 5120, 1280, true, true, false, ops::Fp8Type::E4M3},
      {"weight [1280, 1280]", 1280, 1280, true, true, false, ops::Fp8Type::E4M3},
  };
  std::printf("fp8_quantize, bf16 input, amax given; us per call (GB/s)\n");
  for (const Shape2& sh : shapes) {
    const Tensor x = random_gpu({sh.R, sh.C}, 1, 1.0f);
    const int64_t Rp = (sh.R + 15) / 16 * 16;
    Tensor q = sh.row_major ? Tensor::empty({sh.R, sh.C}, DType::U8, Device::CUDA) : Tensor();
    Tensor qt = sh.transposed ? Tensor::empty({sh.C, Rp}, DType::U8, Device::CUDA) : Tensor();
    Tensor s = Tensor::empty({1}, DType::F32, Device::CUDA);
    Tensor amax = Tensor::from_f32({1}, {4.0f}).to(Device::CUDA);
    Tensor sums = sh.col_sums ? Tensor::zeros({sh.C}, DType::F32, Device::CUDA) : Tensor();
    const double bytes = double(sh.R) * double(sh.C) * (2.0 + (sh.row_major ? 1 : 0) + (sh.transposed ? 1 : 0));
    std::printf("  %-36s", sh.what);
    const double ms = bench::time_ms(iters, [&] { ops::fp8_quantize(q, qt, s, x, sh.type, amax, sums); });
    std::printf("  %8.1f (%5.0f)", 1000.0 * ms, bytes / (ms * 1e-3) / 1e9);
    std::printf("\n");
  }
  return 0;
}
