#include "biofm/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "biofm/core/error.h"

namespace biofm {

double lr_multiplier(const ScheduleSpec& s, int64_t step) {
  if (s.type == "constant") return step < s.warmup_steps ? double(step) / double(s.warmup_steps) : 1.0;
  if (step < s.warmup_steps) return double(step) / double(std::max<int64_t>(1, s.warmup_steps));
  const int64_t decay_end = int64_t(double(s.total_steps) * s.decay_fraction);
  if (step >= decay_end) return s.min_lr_ratio;
  const double progress = double(step - s.warmup_steps) / double(std::max<int64_t>(1, decay_end - s.warmup_steps));
  if (s.type == "warmup_linear") return std::max(s.min_lr_ratio, 1.0 - (1.0 - s.min_lr_ratio) * progress);
  if (s.type == "warmup_cosine")
    return s.min_lr_ratio + (1.0 - s.min_lr_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress));
  fail("unknown scheduler type '", s.type, "'");
}

std::string warmup_note(const ScheduleSpec& s) {
  if (s.warmup_steps == 0 || s.warmup_steps < s.total_steps) return "";
  char peak[32];
  std::snprintf(peak, sizeof peak, "%.3g%%", 100 * lr_multiplier(s, s.total_steps - 1));
  return "scheduler.warmup_steps=" + std::to_string(s.warmup_steps) + " >= num_train_steps=" +
         std::to_string(s.total_steps) + ": the learning rate stays in warmup for the whole run (at most " + peak +
         " of optimizer.lr); lower scheduler.warmup_steps";
}

}  // namespace biofm
