#include "biofm/infer/pooling.h"

#include <cstring>

#include "biofm/core/error.h"
#include "biofm/ops/gemm/op.h"

namespace biofm::infer {

Pooling parse_pooling(const std::string& s) {
  if (s == "mean") return Pooling::Mean;
  if (s == "cls") return Pooling::Cls;
  if (s == "last") return Pooling::Last;
  if (s == "none") return Pooling::None;
  fail("--pooling must be mean, cls, last or none, got '", s, "'");
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    case Pooling::None: return "none";
  }
  return "?";
}

Tensor selection_matrix(const std::vector<std::vector<int32_t>>& rows, int64_t T, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16) fail("select_sum: hidden states must be F32 or BF16");
  // Columns rounded up to 8 keep the GEMM operands 16-byte aligned; the extra columns are 0.
  const int64_t R = (int64_t(rows.size()) + 7) / 8 * 8;
  // selᵀ [T, R]: sel[r, t] = 1 where row t belongs to result r (1.0 is exact in bf16).
  Tensor sel_t = Tensor::zeros({T, R}, dtype);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int32_t t : rows[r]) {
      if (t < 0 || t >= T) fail("select_sum: row ", t, " outside [0, ", T, ")");
      if (dtype == DType::BF16) {
        const uint16_t one = 0x3F80;  // 1.0 in bf16
        std::memcpy(sel_t.bf() + int64_t(t) * R + int64_t(r), &one, sizeof one);
      } else {
        sel_t.f32()[int64_t(t) * R + int64_t(r)] = 1.0f;
      }
    }
  return sel_t;
}

Tensor launch_select_sum(const Tensor& hidden, const Tensor& sel_t) {
  if (hidden.dim() != 2) fail("select_sum: hidden must be [T, H], got ", hidden.describe());
  if (sel_t.dim() != 2 || sel_t.size(0) != hidden.size(0))
    fail("select_sum: selection ", sel_t.describe(), " does not match hidden ", hidden.describe());
  // out[R, H] += selᵀᵀ · hidden: linear_backward's weight-gradient GEMM (fp32 output and
  // accumulation); its w argument only gives the shape here.
  Tensor out = Tensor::zeros({sel_t.size(1), hidden.size(1)}, DType::F32, hidden.device());
  Tensor none;
  ops::linear_backward(none, out, none, sel_t, hidden, out);
  return out;
}

Tensor finish_select_sum(const Tensor& launched, int64_t num_rows) {
  return launched.to(Device::CPU).narrow0(0, num_rows).clone();
}

Tensor select_sum(const Tensor& hidden, const std::vector<std::vector<int32_t>>& rows) {
  const Tensor sel_t = selection_matrix(rows, hidden.size(0), hidden.dtype()).to(hidden.device());
  return finish_select_sum(launch_select_sum(hidden, sel_t), int64_t(rows.size()));
}

}  // namespace biofm::infer
