// The trainer's view of a data pipeline: batches in global-cursor order, resumable from
// the cursor, plus a deterministic pass over a held-out set. Model families plug in their
// batcher (masked LM for ESM-2, causal windows for Llama).
#pragma once
#include <memory>
#include <string>

#include "biofm/data/batch.h"
#include "biofm/data/dataset.h"
#include "biofm/train/config.h"

namespace biofm {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch next() = 0;
  virtual uint64_t cursor() const = 0;
  virtual void set_cursor(uint64_t c) = 0;
  virtual uint64_t epoch() const = 0;
  virtual uint64_t samples_per_epoch() const = 0;  // fixed; safe from any thread
  virtual bool next_eval(Batch& b) = 0;  // false after the last batch (then rewinds)
  virtual void reset_eval() = 0;
  virtual std::string summary() const = 0;  // counts of what was read, truncated, skipped
};

// The batch source the config asks for over `data` (which must outlive it).
std::unique_ptr<BatchSource> make_batch_source(const TrainConfig& cfg, const SequenceDataset& data);

}  // namespace biofm
