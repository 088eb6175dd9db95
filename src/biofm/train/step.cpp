#include "biofm/train/step.h"

#include <algorithm>

#include "biofm/train/upload.h"

namespace biofm {

TrainStep::TrainStep(LanguageModel& model, AdamW& opt)
    : model_(model), opt_(opt), loss_sum_(Tensor::zeros({1}, DType::F32, model.device())) {}

void TrainStep::run(const std::vector<Batch>& micro, double lr) {
  label_tokens_ = 0;
  for (const Batch& b : micro) label_tokens_ += b.num_label_tokens;
  model_.params().zero_grad();
  loss_sum_.zero_();
  if (label_tokens_ > 0) {
    const float scale = 1.0f / float(label_tokens_);
    for (const Batch& b : micro) model_.forward_backward(upload_batch(b, model_.device()), scale, loss_sum_);
  }
  if (before_optimizer) before_optimizer();
  opt_.step(float(lr));
}

double TrainStep::read_mean_loss() const {
  return double(loss_sum_.to(Device::CPU).f32()[0]) / double(std::max<int64_t>(1, label_tokens_));
}

}  // namespace biofm
