// Numeric precision of a model instance and of a training run (the `precision` config key).
#pragma once
#include "biofm/core/dtype.h"

namespace biofm {

// Numeric precision of a model instance ("fp32", "bf16-mixed", "bf16" in configs).
//   F32:        fp32 parameters, activations and math (CPU reference, and CUDA fp32).
//   Bf16Mixed:  fp32 master parameters and optimizer state; a bf16 copy of the parameters
//               feeds bf16 activations/GEMMs with fp32 accumulation (CUDA training default).
//   Bf16:       pure bf16 parameters, no fp32 master copy: the parameters themselves are
//               stored in bf16 and feed the same bf16 activations/GEMMs as Bf16Mixed;
//               gradients and the AdamW moments stay fp32, the update is computed in fp32
//               and rounded to bf16 (nearest even) when written back (CUDA only). Parameters
//               take 2 bytes each instead of Bf16Mixed's 6 (fp32 master + bf16 copy), at
//               the cost of losing updates smaller than half a bf16 ulp.
enum class Precision { F32, Bf16Mixed, Bf16 };

// Dtype of the parameter store's master buffer for a precision (BF16 only for Bf16).
inline DType master_dtype(Precision p) { return p == Precision::Bf16 ? DType::BF16 : DType::F32; }
// The config spelling: "fp32", "bf16-mixed", "bf16".
inline const char* precision_name(Precision p) {
  return p == Precision::F32 ? "fp32" : p == Precision::Bf16Mixed ? "bf16-mixed" : "bf16";
}

}  // namespace biofm
