// Shared test helpers (header only): deterministic random tensors from biofm's counter-based
// RNG, tensor comparison, and a finite-difference gradient checker.
//
// Gradient checks use the objective L = Σ out·R with R a fixed random tensor, so the
// analytic gradient of L with respect to an input is what the op's backward returns when
// fed dout = R. fd_check perturbs elements of the input in place (all of them, or a random
// subset for big tensors), evaluates L(x ± eps) with central differences in double, and
// compares with the analytic gradient:
//   err_i = |a_i - n_i| / max(|n_i|, floor),  floor = max(abs_floor, rel_floor · max_j |n_j|)
// and requires max_i err_i < rtol. The relative floor keeps tiny true gradients, where fp32
// round-off in the forward dominates the difference quotient, from failing spuriously.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/core/rng.h"
#include "biofm/core/tensor.h"
#include "biofm/ops/options.h"

namespace biofm::testkit {

// The message of the biofm::Error that f throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Normal(0, scale²) entries (never exactly zero), a pure function of (seed, shape).
inline Tensor randn(const Shape& shape, uint64_t seed, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    float x = rng_normal(seed, RngStream::Eval, uint64_t(i), 0);
    if (x == 0.0f) x = 1e-3f;
    p[i] = scale * x;
  }
  return t;
}

// Uniform in [lo, hi).
inline Tensor rand_uniform(const Shape& shape, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    p[i] = lo + (hi - lo) * rng_uniform(seed, RngStream::Eval, uint64_t(i), 1);
  return t;
}

// Σ a·b in double (same numel, F32).
inline double dot(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  double s = 0;
  const float* x = a.f32();
  const float* y = b.f32();
  for (int64_t i = 0, n = std::min(a.numel(), b.numel()); i < n; ++i) s += double(x[i]) * y[i];
  return s;
}

inline double sum(const Tensor& a) {
  double s = 0;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) s += a.f32()[i];
  return s;
}

inline double max_abs(const Tensor& a) {
  double m = 0;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) m = std::max(m, double(std::fabs(a.f32()[i])));
  return m;
}

// |a - b| <= atol + rtol·|b| elementwise; reports the worst element.
inline ::testing::AssertionResult tensors_close(const Tensor& a, const Tensor& b, double atol,
                                                double rtol = 0.0) {
  if (a.numel() != b.numel())
    return ::testing::AssertionFailure() << "numel differs: " << a.describe() << " vs " << b.describe();
  double worst = 0;
  int64_t wi = -1;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    const double x = a.f32()[i], y = b.f32()[i];
    const double excess = std::fabs(x - y) - (atol + rtol * std::fabs(y));
    if (!(excess <= 0) && (wi < 0 || excess > worst || std::isnan(excess))) {
      worst = excess;
      wi = i;
    }
  }
  if (wi < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << wi << ": " << a.f32()[wi] << " vs "
                                       << b.f32()[wi] << " (atol " << atol << ", rtol " << rtol
                                       << ")";
}

struct FdOptions {
  double eps = 1e-2;        // central-difference step
  double rtol = 1e-2;       // allowed relative error
  double abs_floor = 1e-3;  // denominators never below this...
  double rel_floor = 0.1;   // ...nor below this fraction of the largest numeric gradient
  int64_t max_samples = 256;  // elements checked at most (a random subset beyond)
  uint64_t seed = 12345;
};

// Checks `grad` (analytic dL/dx) against central differences of `objective` (which must
// read `x`, perturbed here in place and restored). `name` labels failures.
inline ::testing::AssertionResult fd_check(const std::string& name,
                                           const std::function<double()>& objective, Tensor x,
                                           const Tensor& grad, const FdOptions& o = {}) {
  if (x.numel() != grad.numel())
    return ::testing::AssertionFailure() << name << ": gradient " << grad.describe()
                                         << " does not match input " << x.describe();
  const int64_t n = x.numel();
  std::vector<int64_t> idx;
  if (n <= o.max_samples) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t s = 0; s < o.max_samples; ++s)
      idx.push_back(int64_t(rng_below(o.seed, RngStream::Eval, uint64_t(s), 2, uint32_t(n))));
  }
  float* p = x.f32();
  std::vector<double> num(idx.size());
  double nmax = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    const int64_t i = idx[k];
    const float orig = p[i];
    const float xp = float(orig + o.eps), xm = float(orig - o.eps);
    p[i] = xp;
    const double lp = objective();
    p[i] = xm;
    const double lm = objective();
    p[i] = orig;
    num[k] = (lp - lm) / (double(xp) - double(xm));  // the step actually taken in fp32
    nmax = std::max(nmax, std::fabs(num[k]));
  }
  const double floor = std::max(o.abs_floor, o.rel_floor * nmax);
  double worst = -1;
  size_t wk = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    const double a = grad.f32()[idx[k]];
    const double err = std::fabs(a - num[k]) / std::max(std::fabs(num[k]), floor);
    if (std::isnan(err) || err > worst) {
      worst = std::isnan(err) ? 1e300 : err;
      wk = k;
    }
  }
  if (idx.empty() || worst < o.rtol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name << ": element " << idx[wk] << " analytic " << grad.f32()[idx[wk]] << " numeric "
         << num[wk] << " (relative error " << worst << " >= " << o.rtol << ", floor " << floor
         << ", " << idx.size() << " of " << n << " elements checked)";
}

// Sets op options for one scope and restores the previous ones, also when a check throws.
struct ScopedOpOptions {
  ::biofm::ops::OpOptions saved = ::biofm::ops::op_options();
  explicit ScopedOpOptions(const std::function<void(::biofm::ops::OpOptions&)>& edit) {
    ::biofm::ops::OpOptions o = saved;
    edit(o);
    ::biofm::ops::set_op_options(o);
  }
  ~ScopedOpOptions() { ::biofm::ops::set_op_options(saved); }
};

}  // namespace biofm::testkit
