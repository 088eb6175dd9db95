// One optimizer step, the same for `biofm train` and `biofm bench`: zero the gradients, run
// forward/backward over the step's micro batches on the summed token losses, count the label
// tokens on the device, then clip and apply AdamW with the gradients divided by that count
// (inside the norm/clip kernel: no extra pass). Loss sum and label count stay on the device —
// under data parallelism both are summed over ranks before the optimizer — and nothing here
// reads back to the host.
//
// Hooks for what runs beside the step: the model's layer hook (LanguageModel::set_layer_hook)
// fires around each layer inside forward and backward (where data parallelism gathers weights and
// reduces gradients); before_optimizer runs once the gradients of all micro batches are complete.
#pragma once
#include <functional>
#include <vector>

#include "biofm/data/batch.h"
#include "biofm/models/language_model.h"
#include "biofm/train/optimizer.h"
#include "biofm/train/parallel_strategy.h"

namespace biofm {

class TrainStep {
 public:
  // sync: data parallelism (train/parallel_strategy.h): gradients, loss sum and label count
  // are summed over ranks before the optimizer.
  TrainStep(LanguageModel& model, AdamW& opt, StepSync* sync = nullptr);

  // micro: the step's host batches (uploaded here). Without label tokens the gradients stay
  // zero (AdamW still steps, so its step count matches the trainer's).
  void run(const std::vector<Batch>& micro, double lr);
  std::function<void()> before_optimizer;

  int64_t label_tokens() const { return label_tokens_; }  // of the last step, this rank's
  // Σ token losses and the label-token count of the last step (F32 [1] each, views of one
  // [2] tensor on the device; over all ranks).
  Tensor& loss_sum() { return loss_sum_; }
  Tensor& label_count() { return label_count_; }
  // Mean token loss of the last step (reads the device: a sync).
  double read_mean_loss() const;
  // The same with the step's label-token count over all ranks, in one read. A step without
  // label tokens (e.g. windows of only N bases) has count 0 and no loss: mean is NaN.
  struct Loss {
    double mean = 0, label_count = 0;
  };
  Loss read_loss() const;

 private:
  LanguageModel& model_;
  AdamW& opt_;
  StepSync* sync_;
  Tensor sums_;                   // F32 [2]: Σ token losses, label count (one reduction under DDP)
  Tensor loss_sum_, label_count_;  // views of sums_
  int64_t label_tokens_ = 0;
};

}  // namespace biofm
