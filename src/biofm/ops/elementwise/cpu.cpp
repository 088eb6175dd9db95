// Small elementwise helpers, CPU.
#include <algorithm>
#include <cstring>

#include "biofm/ops/cpu_util.h"
#include "biofm/ops/elementwise/op.h"

namespace biofm::ops::cpu {
using namespace cpu_detail;

namespace {

void require_float_like(const Tensor& t, const char* op, const char* name) {
  if (!t.defined()) fail(op, ": ", name, " is undefined");
  if (t.device() != Device::CPU) fail(op, ": ", name, " must be on the CPU, got ", t.describe());
  if (t.dtype() != DType::F32 && t.dtype() != DType::BF16)
    fail(op, ": ", name, " must be F32 or BF16, got ", t.describe());
}

}  // namespace

void add_inplace(Tensor& y, const Tensor& x) {
  const char* op = "add_inplace";
  require_float_like(y, op, "y");
  require_float_like(x, op, "x");
  if (x.shape() != y.shape() || x.dtype() != y.dtype())
    fail(op, ": x ", x.describe(), " must match y ", y.describe());
  const int64_t n = y.numel();
  if (y.dtype() == DType::F32) {
    float* yp = y.f32();
    const float* xp = x.f32();
#pragma omp parallel for simd schedule(static) num_threads(threads_for(n))
    for (int64_t i = 0; i < n; ++i) yp[i] += xp[i];
  } else {
    bf16* yp = y.bf();
    const bf16* xp = x.bf();
#pragma omp parallel for schedule(static) num_threads(threads_for(n))
    for (int64_t i = 0; i < n; ++i) yp[i] = f32_to_bf16(bf16_to_f32(yp[i]) + bf16_to_f32(xp[i]));
  }
}

void cast(Tensor& dst, const Tensor& src) {
  const char* op = "cast";
  if (!dst.defined() || !src.defined()) fail(op, ": dst and src must be defined");
  if (dst.device() != Device::CPU || src.device() != Device::CPU)
    fail(op, ": both tensors must be on the CPU, got ", dst.describe(), " and ", src.describe());
  if (dst.numel() != src.numel())
    fail(op, ": dst ", dst.describe(), " and src ", src.describe(), " differ in element count");
  const int64_t n = src.numel();
  if (dst.dtype() == src.dtype()) {
    if (dst.raw() != src.raw()) std::memmove(dst.raw(), src.raw(), src.nbytes());
  } else if (src.dtype() == DType::F32 && dst.dtype() == DType::BF16) {
    const float* s = src.f32();
    bf16* d = dst.bf();
#pragma omp parallel for schedule(static) num_threads(threads_for(n))
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
  } else if (src.dtype() == DType::BF16 && dst.dtype() == DType::F32) {
    const bf16* s = src.bf();
    float* d = dst.f32();
#pragma omp parallel for schedule(static) num_threads(threads_for(n))
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
  } else {
    fail(op, ": no conversion from ", src.describe(), " to ", dst.describe());
  }
}

void sum_accumulate(Tensor& acc, const Tensor& x) {
  const char* op = "sum_accumulate";
  require_f32(acc, op, "acc");
  if (acc.numel() != 1) fail(op, ": acc must hold one element, got ", acc.describe());
  require_float_like(x, op, "x");
  const int64_t n = x.numel();
  double s = 0;
  if (x.dtype() == DType::F32) {
    const float* p = x.f32();
#pragma omp parallel for simd schedule(static) reduction(+ : s) num_threads(threads_for(n))
    for (int64_t i = 0; i < n; ++i) s += p[i];
  } else {
    const bf16* p = x.bf();
#pragma omp parallel for schedule(static) reduction(+ : s) num_threads(threads_for(n))
    for (int64_t i = 0; i < n; ++i) s += bf16_to_f32(p[i]);
  }
  acc.f32()[0] += float(s);
}

}  // namespace biofm::ops::cpu
