// The norms in front of an FP8 GEMM under DelayedScaling, on their own (bf16, 16k-token micro
// batch): the norm kernel followed by the quantization (both forms of the codes), against the
// norm writing the codes itself (layernorm_forward_fp8 / rmsnorm_forward_fp8), with and without
// the transposed codes (a byte transpose after the norm).
//
// Standalone program (no CMake target), built like bench/norm_bias_bench.cpp. Run on the GPU
// machine: ./norm_fp8_bench [iterations]   (default 50). GB/s counts the bytes each way must move
// at least once: the norm + quantization 2 + 2 + 2 + 2 bytes per value (x in, y out, y in, both
// codes out); the norm writing codes 2 + 1, and 2 more for the transpose (codes in, codes out).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "biofm/ops/fp8/op.h"
#include "biofm/ops/norm/op.h"
#include "op_bench_util.h"

using namespace biofm;
using bench::random_gpu;

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int64_t N = 16384;
  const ops::Fp8Type t = ops::Fp8Type::E4M3;
  std::printf("[%lld, C] bf16 -> E4M3 codes (row-major and transposed); us per call (GB/s)\n", (long long)N);
  for (int64_t C : {1280, 2048, 4096}) {
    const Tensor x = random_gpu({N, C}, 1, 1.0f), w = random_gpu({C}, 4, 0.1f), b = random_gpu({C}, 5, 0.1f);
    Tensor y = Tensor::empty({N, C}, DType::BF16, Device::CUDA);
    Tensor mean = Tensor::empty({N}, DType::F32, Device::CUDA), rstd = Tensor::empty({N}, DType::F32, Device::CUDA);
    Tensor q = Tensor::empty({N, C}, DType::U8, Device::CUDA), qt = Tensor::empty({C, N}, DType::U8, Device::CUDA);
    Tensor s = Tensor::empty({1}, DType::F32, Device::CUDA), amax = Tensor::empty({1}, DType::F32, Device::CUDA);
    const Tensor scale_amax = Tensor::from_f32({1}, {3.0f}).to(Device::CUDA);
    const double vals = double(N) * double(C);
    auto gbs = [&](double us, double bytes_per_value) { return vals * bytes_per_value / (us * 1e-6) / 1e9; };
    for (bool rms : {false, true}) {
      const double two = 1000.0 * bench::time_ms(iters, [&] {
        if (rms)
          ops::rmsnorm_forward(y, rstd, x, w, 1e-6f, amax);
        else
          ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f, amax);
        ops::fp8_quantize(q, qt, s, y, t, scale_amax);
      });
      const double norm_only = 1000.0 * bench::time_ms(iters, [&] {
        if (rms)
          ops::rmsnorm_forward(y, rstd, x, w, 1e-6f, amax);
        else
          ops::layernorm_forward(y, mean, rstd, x, w, b, 1e-5f, amax);
      });
      std::printf("%-9s C=%-5lld norm %7.1f (%6.0f) + quantize = %7.1f (%6.0f)", rms ? "rmsnorm" : "layernorm",
                  (long long)C, norm_only, gbs(norm_only, 4), two, gbs(two, 8));
      Tensor no_t;
      for (Tensor* qt_or_none : {&no_t, &qt}) {
        const double one = 1000.0 * bench::time_ms(iters, [&] {
          if (rms)
            ops::rmsnorm_forward_fp8(q, *qt_or_none, s, rstd, x, w, 1e-6f, t, scale_amax, amax);
          else
            ops::layernorm_forward_fp8(q, *qt_or_none, s, mean, rstd, x, w, b, 1e-5f, t, scale_amax, amax);
        });
        const bool both = qt_or_none->defined();
        std::printf(" | codes%s %7.1f (%6.0f)", both ? " + transposed" : "", one, gbs(one, both ? 5 : 3));
      }
      std::printf("\n");
    }
  }
  return 0;
}
