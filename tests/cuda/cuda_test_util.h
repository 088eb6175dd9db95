// Helpers for the CUDA op tests (tests/cuda/, label "cuda", GPU machine only): random host
// tensors (from tests/testing.h), dtype rounding, host <-> device copies, NaN poisoning and the
// relative error used to hold CUDA results against the CPU reference.
//
// The pattern of every test: make F32 host inputs, round them to the dtype under test
// (round_to), run the CPU op on the rounded F32 copies and the CUDA op on device copies in
// that dtype, and require rel_error(cuda, cpu) below tol(dtype): 1e-5 for F32, 1e-2 for BF16.
// Outputs are poisoned with NaN before the CUDA call, so anything left unwritten fails;
// accumulated gradients start from the same random values on both sides instead.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../testing.h"
#include "biofm/core/cuda_context.h"
#include "biofm/core/device_memory.h"
#include "biofm/core/dtype.h"
#include "biofm/core/rng.h"
#include "biofm/core/tensor.h"

namespace biofm::cudatest {

using testkit::rand_uniform;
using testkit::randn;

// Skips the test where no GPU is visible (the CUDA build on a CPU-only machine).
#define BIOFM_REQUIRE_GPU()                                           \
  do {                                                                \
    if (!::biofm::cuda_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

inline const char* dtname(DType t) { return dtype_name(t); }

// Relative-error budget for results in dtype `t`.
inline double tol(DType t) { return t == DType::F32 ? 1e-5 : 1e-2; }

// F32 host tensor with every value rounded to what dtype `t` can hold (identity for F32).
inline Tensor round_to(const Tensor& f32, DType t) {
  if (t == DType::F32) return f32.clone();
  return f32.to(t).to(DType::F32);
}

// Device copy of an F32 host tensor in dtype `t` (rounded to nearest even for BF16).
inline Tensor to_device(const Tensor& host_f32, DType t) {
  Tensor h = t == DType::F32 ? host_f32 : host_f32.to(t);
  return h.to(Device::CUDA);
}

inline Tensor to_device_i32(const Shape& shape, const std::vector<int32_t>& v) {
  return Tensor::from_i32(shape, v).to(Device::CUDA);
}

// Waits for the compute stream, then copies a device tensor back as F32.
inline Tensor to_host_f32(const Tensor& dev) {
  cuda_ctx::synchronize();
  Tensor h = dev.to(Device::CPU);
  return h.dtype() == DType::F32 ? h : h.to(DType::F32);
}

// Fills a device F32 / BF16 tensor with NaN.
inline void poison(Tensor& dev) {
  Tensor h = Tensor::empty(dev.shape(), dev.dtype());
  if (dev.dtype() == DType::F32) {
    h.fill_(NAN);
  } else if (dev.dtype() == DType::BF16) {
    bf16* p = h.bf();
    for (int64_t i = 0, n = h.numel(); i < n; ++i) p[i] = bf16(0x7fc0);
  } else {
    ADD_FAILURE() << "poison: unsupported dtype " << h.describe();
  }
  dev.copy_from(h);
  cuda_ctx::synchronize();
}

// ||a - b|| / ||b|| over F32 host tensors (same numel); +inf where only one side holds a NaN /
// inf (or they differ there), or the sizes differ. Where ||b|| == 0 it is ||a - b||.
inline double rel_error(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return INFINITY;
  const float* x = a.f32();
  const float* y = b.f32();
  double num = 0, den = 0;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      if ((std::isnan(x[i]) && std::isnan(y[i])) || x[i] == y[i]) continue;  // agreed
      return INFINITY;
    }
    const double d = double(x[i]) - double(y[i]);
    num += d * d;
    den += double(y[i]) * double(y[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Whether every value of an F32 host tensor is finite (after poison(): the op wrote it all).
inline bool all_finite(const Tensor& h) {
  const float* x = h.f32();
  for (int64_t i = 0, n = h.numel(); i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

// a - b elementwise (F32 host).
inline Tensor minus(const Tensor& a, const Tensor& b) {
  Tensor d = a.clone();
  for (int64_t i = 0, n = a.numel(); i < n; ++i) d.f32()[i] -= b.f32()[i];
  return d;
}

// rel_error(a, b) < bound, with a message naming the case.
inline ::testing::AssertionResult close(const std::string& what, const Tensor& a, const Tensor& b,
                                        double bound) {
  const double e = rel_error(a, b);
  if (e < bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": relative error " << e << " >= " << bound
                                       << " (" << a.describe() << " vs " << b.describe() << ")";
}

// Integers uniform in [lo, hi).
inline std::vector<int32_t> rand_ints(int64_t n, uint64_t seed, int32_t lo, int32_t hi) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] =
        lo + int32_t(rng_below(seed, RngStream::Eval, uint64_t(i), 3, uint32_t(hi - lo)));
  return v;
}

// The activation / parameter dtype pairs every CUDA op supports.
struct DtypeCombo {
  DType act, param;
};
inline std::string combo_name(const DtypeCombo& c) {
  return std::string(dtname(c.act)) + "/" + dtname(c.param);
}
inline const std::vector<DtypeCombo>& dtype_combos() {
  static const std::vector<DtypeCombo> v = {
      {DType::F32, DType::F32}, {DType::BF16, DType::BF16}, {DType::BF16, DType::F32}};
  return v;
}

}  // namespace biofm::cudatest
