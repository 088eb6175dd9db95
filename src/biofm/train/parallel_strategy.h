// How data-parallel training shares the work (distributed.strategy), and what a training step
// asks of it (StepSync; train/data_parallel.h for ddp/zero1, train/fsdp.h for zero2/fsdp).
#pragma once
#include "biofm/core/tensor.h"

namespace biofm {

enum class ParallelStrategy { Ddp, Zero1, Zero2, Fsdp };
const char* strategy_name(ParallelStrategy s);  // "ddp", "zero1", "zero2", "fsdp"

// The collectives of one optimizer step, driven by TrainStep (train/step.h) and the model's
// layer hook. Every rank must issue the same collectives in the same order.
class StepSync {
 public:
  virtual ~StepSync() = default;
  // Before the step's first micro batch (the gradients were just zeroed).
  virtual void begin_step() {}
  // Before the step's last micro batch.
  virtual void arm() {}
  // In place of a micro batch this rank skips (no label tokens, so no forward or backward):
  // whatever collectives that pass would have issued.
  virtual void skip_micro_batch() {}
  // After the last micro batch: the gradients are complete where the optimizer reads them, and
  // `sums` (F32 [2]: loss sum, label count) is summed over ranks.
  virtual void finish(Tensor& sums) = 0;
};

}  // namespace biofm
