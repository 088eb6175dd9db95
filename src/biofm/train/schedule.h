// Learning-rate schedules of the seed recipes, as multipliers of the peak lr.
#pragma once
#include <cstdint>
#include <string>

namespace biofm {

struct ScheduleSpec {
  std::string type = "warmup_linear";  // warmup_linear | warmup_cosine | constant
  int64_t warmup_steps = 2000;
  int64_t total_steps = 1000;
  double decay_fraction = 0.9;  // decay ends at decay_fraction · total_steps, then flat
  double min_lr_ratio = 0.1;
};

// Multiplier for the optimizer step with 0-based index `step` (torch LambdaLR semantics):
// warmup step/warmup_steps, then linear (or cosine) decay from 1 to min_lr_ratio at
// decay_fraction·total_steps, then min_lr_ratio.
double lr_multiplier(const ScheduleSpec& s, int64_t step);

// A note when the warmup lasts the whole run (warmup_steps >= total_steps: the learning rate
// never reaches its peak), else "".
std::string warmup_note(const ScheduleSpec& s);

}  // namespace biofm
