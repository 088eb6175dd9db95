#include "biofm/train/step.h"

#include <algorithm>
#include <limits>

#include "biofm/core/profiling.h"
#include "biofm/ops/loss/op.h"
#include "biofm/train/upload.h"

namespace biofm {

TrainStep::TrainStep(LanguageModel& model, AdamW& opt, StepSync* sync)
    : model_(model),
      opt_(opt),
      sync_(sync),
      sums_(Tensor::zeros({2}, DType::F32, model.device())),
      loss_sum_(sums_.flat_slice(0, {1})),
      label_count_(sums_.flat_slice(1, {1})) {}

void TrainStep::run(const std::vector<Batch>& micro, double lr) {
  ProfilerWindow::step_begin();
  NvtxRange step_range("train_step");
  label_tokens_ = 0;
  for (const Batch& b : micro) label_tokens_ += b.num_label_tokens;
  // (an update owed from the last step zeroes each part's gradients as it applies it: AdamW)
  if (!opt_.update_owed()) model_.params().zero_grad();
  sums_.zero_();
  if (sync_) sync_->begin_step();
  for (size_t i = 0; i < micro.size(); ++i) {
    const Batch& hb = micro[i];
    if (sync_ && i + 1 == micro.size()) sync_->arm();  // reductions overlap the last backward
    // (context parallelism: a share without labels still takes part in its group's attention)
    if (hb.num_label_tokens == 0 && !(hb.cp && hb.cp->group_label_tokens > 0)) {
      if (sync_) sync_->skip_micro_batch();
      continue;
    }
    NvtxRange fb("micro batch %d", int(i + 1));  // (the model marks its phases and layers inside)
    Batch b = upload_batch(hb, model_.device());
    ops::count_labels_accumulate(label_count_, b.labels);
    model_.forward_backward(b, 1.0f, loss_sum_);
  }
  if (sync_) {
    NvtxRange sync_range("gradient_sync");
    sync_->finish(sums_);
  }
  if (before_optimizer) before_optimizer();
  {
    NvtxRange opt_range("optimizer");
    opt_.step(float(lr), label_count_);
  }
  model_.quant_step_end();  // DelayedScaling: the next step's scales from this step's amaxes
  ProfilerWindow::step_end();
}

double TrainStep::read_mean_loss() const {
  const double count = double(label_count_.to(Device::CPU).f32()[0]);
  return double(loss_sum_.to(Device::CPU).f32()[0]) / std::max(1.0, count);
}

TrainStep::Loss TrainStep::read_loss() const {
  const Tensor h = sums_.to(Device::CPU);
  const double count = double(h.f32()[1]);
  return {count > 0 ? double(h.f32()[0]) / count : std::numeric_limits<double>::quiet_NaN(), count};
}

}  // namespace biofm
