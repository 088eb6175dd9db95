// The thread's "weight gradients beside" switch (ops/gemm/op.h), read by the CUDA linear ops.
#include "biofm/ops/gemm/op.h"

namespace biofm::ops {

namespace {
thread_local bool t_beside = false;
}

WeightGradsBeside::WeightGradsBeside(bool on) : previous_(t_beside) { t_beside = on; }
WeightGradsBeside::~WeightGradsBeside() { t_beside = previous_; }
bool weight_grads_beside() { return t_beside; }

}  // namespace biofm::ops
