// The training loop: data → micro batches → forward/backward (with accumulation) →
// clip → AdamW with the scheduled lr → log → checkpoint; resume from the latest checkpoint;
// final Hugging Face export.
#pragma once
#include <string>

#include "biofm/train/config.h"
#include "biofm/train/optimizer.h"

namespace biofm {

struct TrainSummary {
  int64_t start_step = 0, end_step = 0;
  double first_loss = 0, last_loss = 0;
  double wall_seconds = 0;
  std::string ckpt_dir, last_checkpoint, final_model_dir;
  int64_t skipped_nonfinite_steps = 0;
  // Steps whose loss was read (every step on the CPU, every logger.frequency on a GPU), and those
  // of them without label tokens (no loss; not in first_loss / last_loss).
  int64_t checked_steps = 0, no_target_steps = 0;
};

// The optimizer section of a config (plus clip_grad_norm).
AdamWConfig adamw_config(const TrainConfig& cfg);

// ops.adamw_ahead where it applies (one process; the optimizer neither sharded nor offloaded):
// from the first step on, each update is applied one layer ahead in the model's next pass
// (AdamW::apply_ahead_in). Whether it applies.
bool apply_adamw_ahead(const TrainConfig& cfg, AdamW& opt, LanguageModel& model, bool one_process);

// What a health check found non-finite, the other value beside it: "non-finite grad norm nan
// (loss 4.7e+16)", "non-finite loss nan (grad norm 0.5)", "non-finite loss nan and grad norm inf".
std::string nonfinite_text(double loss, double grad_norm);

// Runs training as the config says. Validates paths (data readable, output and checkpoint
// directories writable) before any work.
// `config_header`: comment lines atop the run's config.yaml (cli/config_search.h's config_provenance).
TrainSummary run_training(const TrainConfig& cfg, const std::string& config_header = "");

}  // namespace biofm
