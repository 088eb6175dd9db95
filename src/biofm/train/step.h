// One optimizer step, the same for `biofm train` and `biofm bench`: zero the gradients, run
// forward/backward over the step's micro batches with each token's loss weighted by
// 1 / (label tokens of the whole step), then clip and apply AdamW. The summed loss stays on
// the device; nothing here reads back to the host.
//
// Hooks for what runs beside the step: the model's grads-ready hook (LanguageModel::
// set_grads_ready_hook) fires inside backward per layer; before_optimizer runs once the
// gradients of all micro batches are complete (where a data-parallel reduction finishes).
#pragma once
#include <functional>
#include <vector>

#include "biofm/data/batch.h"
#include "biofm/models/language_model.h"
#include "biofm/train/optimizer.h"

namespace biofm {

class TrainStep {
 public:
  TrainStep(LanguageModel& model, AdamW& opt);

  // micro: the step's host batches (uploaded here). Without label tokens the gradients stay
  // zero (AdamW still steps, so its step count matches the trainer's).
  void run(const std::vector<Batch>& micro, double lr);
  std::function<void()> before_optimizer;

  int64_t label_tokens() const { return label_tokens_; }  // of the last step
  // Σ token losses of the last step (F32 [1] on the device).
  const Tensor& loss_sum() const { return loss_sum_; }
  // Mean token loss of the last step (reads the device: a sync).
  double read_mean_loss() const;

 private:
  LanguageModel& model_;
  AdamW& opt_;
  Tensor loss_sum_;
  int64_t label_tokens_ = 0;
};

}  // namespace biofm
