// AdamW over a flat parameter store, with per-parameter weight-decay flags from the
// model's parameter table, global gradient norm and clipping.
#pragma once
#include <map>
#include <string>

#include "biofm/models/params.h"
#include "biofm/ops/optim/op.h"

namespace biofm {

struct AdamWConfig {
  float lr = 4e-4f, beta1 = 0.9f, beta2 = 0.98f, eps = 1e-8f, weight_decay = 0.01f;
};

class AdamW {
 public:
  AdamW(ParamStore& params, const AdamWConfig& cfg);
  // One update with learning rate `lr` (the schedule's value for this step).
  void step(float lr);
  int64_t steps_taken() const { return step_; }

  // Moments as flat tensors, for checkpoints.
  std::map<std::string, Tensor> state() const;
  void load_state(const std::map<std::string, Tensor>& st, int64_t steps_taken);

 private:
  ParamStore& params_;
  AdamWConfig cfg_;
  Tensor m_, v_;
  int64_t step_ = 0;
};

// sqrt(Σ g²) over the whole gradient buffer (one host read).
double global_grad_norm(const ParamStore& params);
// torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is < 1.
void clip_grad_norm(ParamStore& params, double norm, double max_norm);

}  // namespace biofm
