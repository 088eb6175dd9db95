// CUDA GELU (erf, tanh) and SwiGLU against the CPU reference (label "cuda": GPU machine only).
#include <gtest/gtest.h>

#include "biofm/ops/activation/op.h"
#include "cuda_test_util.h"

using namespace biofm;
using namespace biofm::cudatest;

namespace {

// Shapes [rows, cols]: odd sizes (tails after the 8-wide vectors), model sizes.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1},     {1, 7},       {37, 33},
                                                          {37, 1280}, {4096, 5120}, {19, 1001}};

std::string shape_label(const std::pair<int64_t, int64_t>& s) {
  return "[" + std::to_string(s.first) + ", " + std::to_string(s.second) + "]";
}

}  // namespace

TEST(CudaActivation, GeluMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  uint64_t seed = 1;
  for (const auto& s : kShapes) {
    for (DType dt : {DType::F32, DType::BF16}) {
      for (ops::GeluKind kind : {ops::GeluKind::Erf, ops::GeluKind::Tanh}) {
        seed += 3;
        const std::string L = std::string("gelu ") +
                              (kind == ops::GeluKind::Erf ? "erf " : "tanh ") + dtname(dt) + " " +
                              shape_label(s);
        const Shape shape = {s.first, s.second};
        Tensor x0 = round_to(randn(shape, seed, 3.0f), dt);
        Tensor g0 = round_to(randn(shape, seed + 1), dt);
        Tensor y_ref = Tensor::empty(shape, DType::F32), dx_ref = Tensor::empty(shape, DType::F32);
        ops::cpu::gelu_forward(y_ref, x0, kind);
        ops::cpu::gelu_backward(dx_ref, g0, x0, kind);

        Tensor x = to_device(x0, dt), g = to_device(g0, dt);
        Tensor y = Tensor::empty(shape, dt, Device::CUDA),
               dx = Tensor::empty(shape, dt, Device::CUDA);
        poison(y);
        poison(dx);
        ops::cuda::gelu_forward(y, x, kind);
        ops::cuda::gelu_backward(dx, g, x, kind);
        EXPECT_TRUE(close(L + " forward", to_host_f32(y), y_ref, tol(dt)));
        EXPECT_TRUE(close(L + " backward", to_host_f32(dx), dx_ref, tol(dt)));

        // In place: out aliasing x, dx aliasing dout.
        Tensor xi = to_device(x0, dt);
        ops::cuda::gelu_forward(xi, xi, kind);
        EXPECT_TRUE(close(L + " forward in place", to_host_f32(xi), y_ref, tol(dt)));
        ops::cuda::gelu_backward(g, g, x, kind);
        EXPECT_TRUE(close(L + " backward in place", to_host_f32(g), dx_ref, tol(dt)));
      }
    }
  }
}

TEST(CudaActivation, SwigluMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  uint64_t seed = 500;
  for (const auto& s : kShapes) {
    for (DType dt : {DType::F32, DType::BF16}) {
      seed += 4;
      const std::string L = std::string("swiglu ") + dtname(dt) + " " + shape_label(s);
      const Shape shape = {s.first, s.second};
      Tensor gate0 = round_to(randn(shape, seed, 3.0f), dt);
      Tensor up0 = round_to(randn(shape, seed + 1), dt);
      Tensor d0 = round_to(randn(shape, seed + 2), dt);
      Tensor y_ref = Tensor::empty(shape, DType::F32);
      Tensor dg_ref = Tensor::empty(shape, DType::F32), du_ref = Tensor::empty(shape, DType::F32);
      ops::cpu::swiglu_forward(y_ref, gate0, up0);
      ops::cpu::swiglu_backward(dg_ref, du_ref, d0, gate0, up0);

      Tensor gate = to_device(gate0, dt), up = to_device(up0, dt), d = to_device(d0, dt);
      Tensor y = Tensor::empty(shape, dt, Device::CUDA);
      Tensor dg = Tensor::empty(shape, dt, Device::CUDA),
             du = Tensor::empty(shape, dt, Device::CUDA);
      poison(y);
      poison(dg);
      poison(du);
      ops::cuda::swiglu_forward(y, gate, up);
      ops::cuda::swiglu_backward(dg, du, d, gate, up);
      EXPECT_TRUE(close(L + " forward", to_host_f32(y), y_ref, tol(dt)));
      EXPECT_TRUE(close(L + " dgate", to_host_f32(dg), dg_ref, tol(dt)));
      EXPECT_TRUE(close(L + " dup", to_host_f32(du), du_ref, tol(dt)));

      // One gradient at a time (the other undefined).
      Tensor none;
      poison(dg);
      ops::cuda::swiglu_backward(dg, none, d, gate, up);
      EXPECT_TRUE(close(L + " dgate only", to_host_f32(dg), dg_ref, tol(dt)));
      poison(du);
      ops::cuda::swiglu_backward(none, du, d, gate, up);
      EXPECT_TRUE(close(L + " dup only", to_host_f32(du), du_ref, tol(dt)));

      // Outputs aliasing inputs: dgate over gate, dup over up.
      ops::cuda::swiglu_backward(gate, up, d, gate, up);
      EXPECT_TRUE(close(L + " dgate in place", to_host_f32(gate), dg_ref, tol(dt)));
      EXPECT_TRUE(close(L + " dup in place", to_host_f32(up), du_ref, tol(dt)));
    }
  }
}

TEST(CudaActivation, MisalignedViews) {
  BIOFM_REQUIRE_GPU();
  // Views one element into their storage: not 16-byte aligned, so the scalar path.
  const int64_t n = 1000;
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor flat0 = round_to(randn({n + 1}, 91, 2.0f), dt);
    Tensor x0 = flat0.flat_slice(1, {n}).clone();
    Tensor y_ref = Tensor::empty({n}, DType::F32);
    ops::cpu::gelu_forward(y_ref, x0, ops::GeluKind::Erf);
    Tensor flat = to_device(flat0, dt);
    Tensor x = flat.flat_slice(1, {n});
    Tensor y = Tensor::empty({n}, dt, Device::CUDA);
    poison(y);
    ops::cuda::gelu_forward(y, x, ops::GeluKind::Erf);
    EXPECT_TRUE(
        close(std::string("gelu misaligned ") + dtname(dt), to_host_f32(y), y_ref, tol(dt)));
  }
}

// Packed SwiGLU (gate | up rows of one [N, 2F] GEMM output) against the CPU reference;
// F = 8192 (Llama 1B), 11008 and an odd F (scalar path).
TEST(CudaActivation, SwigluPackedMatchesCpu) {
  BIOFM_REQUIRE_GPU();
  uint64_t seed = 700;
  for (const auto& s : std::vector<std::pair<int64_t, int64_t>>{{64, 8192}, {7, 11008}, {33, 37}}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      seed += 3;
      const int64_t N = s.first, F = s.second;
      Tensor gu0 = round_to(randn({N, 2 * F}, seed, 3.0f), dt);
      Tensor d0 = round_to(randn({N, F}, seed + 1), dt);
      Tensor y_ref = Tensor::empty({N, F}, DType::F32), dgu_ref = Tensor::empty({N, 2 * F}, DType::F32);
      ops::cpu::swiglu_forward_packed(y_ref, gu0, Tensor());
      ops::cpu::swiglu_backward_packed(dgu_ref, d0, gu0, Tensor());
      Tensor gu = to_device(gu0, dt), d = to_device(d0, dt);
      Tensor y = Tensor::empty({N, F}, dt, Device::CUDA), dgu = Tensor::empty({N, 2 * F}, dt, Device::CUDA);
      poison(y);
      poison(dgu);
      ops::cuda::swiglu_forward_packed(y, gu, Tensor());
      ops::cuda::swiglu_backward_packed(dgu, d, gu, Tensor());
      const std::string L = std::string("swiglu packed ") + dtname(dt) + " [" + std::to_string(N) + ", " +
                            std::to_string(F) + "]";
      EXPECT_TRUE(close(L + " forward", to_host_f32(y), y_ref, tol(dt)));
      EXPECT_TRUE(close(L + " dgate_up", to_host_f32(dgu), dgu_ref, tol(dt)));
    }
  }
}
