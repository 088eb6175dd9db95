// The MLP's GELU inside the FP8 quantization under DelayedScaling (ops::fp8_quantize_gelu), at
// the ESM-2 650M shape of a 16k-token micro batch ([16384, 5120] bf16): forward (E4M3 codes,
// row-major and transposed) and backward (E5M2 codes of dact ⊙ gelu'(pre), both layouts, with
// the bias gradient's column sums). Against it: the plain quantization of a bf16 tensor of the
// same shape (the same kernel without the GELU: what the bytes cost).
//
// Session 23 (H100, docs/PERFORMANCE.md): the GELU quantizations ran at 259 / 323 us against
// 119 / 140 us for the plain ones, and copies of the kernel with a cheaper erf or none at all ran
// just as slowly: the cost was the amax of the GELU's output, one same-address atomicMax per warp
// (164k per call). With the atomics that cannot raise the maximum skipped, 165 / 240 us; copies
// then showed one atomic per block and the CPU reference's rational erf worth 5-19 us more, and
// the kernel without any erf at the plain quantization's time.
//
// Standalone program (no CMake target), built like bench/fp8_quantize_bench.cpp:
//   g++ -std=c++20 -O2 -DBIOFM_WITH_CUDA=1 -Isrc -Ibench -I/usr/local/cuda/include
//       bench/fp8_gelu_bench.cpp build/libbiofm_lib.a <biofm_lib's link libraries> -o fp8_gelu_bench
// Run on the GPU machine: ./fp8_gelu_bench [iterations]   (default 50). GB/s counts the bytes
// that must move: forward 2 in + 1 + 1 out per element; backward 2 + 2 in + 1 + 1 out.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "biofm/ops/fp8/op.h"
#include "op_bench_util.h"

using namespace biofm;
using bench::random_gpu;

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int64_t R = 16384, C = 5120;
  const double n = double(R) * double(C);
  const Tensor pre = random_gpu({R, C}, 1, 1.5f), dact = random_gpu({R, C}, 2, 1e-3f);
  Tensor q = Tensor::empty({R, C}, DType::U8, Device::CUDA), qt = Tensor::empty({C, R}, DType::U8, Device::CUDA);
  Tensor s = Tensor::empty({1}, DType::F32, Device::CUDA), seen = Tensor::empty({1}, DType::F32, Device::CUDA);
  Tensor sums = Tensor::zeros({C}, DType::F32, Device::CUDA);
  const Tensor amax_fwd = Tensor::from_f32({1}, {6.0f}).to(Device::CUDA);
  const Tensor amax_bwd = Tensor::from_f32({1}, {4e-3f}).to(Device::CUDA);
  const ops::Fp8Type e4 = ops::Fp8Type::E4M3, e5 = ops::Fp8Type::E5M2;
  auto gbs = [&](double us, double bytes) { return n * bytes / (us * 1e-6) / 1e9; };
  auto row = [&](const char* what, double us, double bytes) {
    std::printf("  %-58s %8.1f us  %6.0f GB/s\n", what, us, gbs(us, bytes));
  };
  std::printf("[%lld, %lld] bf16, us per call (GB/s of the bytes that must move)\n", (long long)R, (long long)C);
  Tensor none;
  std::printf("forward (E4M3, q and q_t)\n");
  row("fp8_quantize_gelu (the library kernel)", 1000.0 * bench::time_ms(iters, [&] {
        ops::fp8_quantize_gelu(q, qt, s, pre, none, e4, amax_fwd, seen);
      }), 4);
  row("fp8_quantize of a bf16 tensor (no GELU, amax given)", 1000.0 * bench::time_ms(iters, [&] {
        ops::fp8_quantize(q, qt, s, pre, e4, amax_fwd);
      }), 4);
  std::printf("backward (E5M2, q and q_t, column sums)\n");
  row("fp8_quantize_gelu (the library kernel)", 1000.0 * bench::time_ms(iters, [&] {
        ops::fp8_quantize_gelu(q, qt, s, pre, dact, e5, amax_bwd, seen, sums);
      }), 6);
  row("fp8_quantize of a bf16 tensor with column sums (no GELU)", 1000.0 * bench::time_ms(iters, [&] {
        ops::fp8_quantize(q, qt, s, dact, e5, amax_bwd, sums);
      }), 4);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  return 0;
}
