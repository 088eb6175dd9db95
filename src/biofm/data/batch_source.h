// The trainer's view of a data pipeline: batches in global-cursor order, resumable from
// the cursor, plus a deterministic pass over a held-out set. Each model family names the
// source it trains on (models/registry.h): masked LM for ESM-2, causal windows for Llama.
#pragma once
#include <memory>
#include <string>

#include "biofm/data/batch.h"
#include "biofm/data/corpus.h"
#include "biofm/data/dataset.h"
#include "biofm/data/pack.h"
#include "biofm/data/tokenizer.h"

namespace biofm {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch next() = 0;
  // Moves past the next batch without handing it out (data parallelism: another rank's
  // batch). Sources that can find batch boundaries without building batches override it.
  virtual void skip() { Batch ignored = next(); (void)ignored; }
  virtual uint64_t cursor() const = 0;
  virtual void set_cursor(uint64_t c) = 0;
  virtual uint64_t epoch() const = 0;
  virtual uint64_t samples_per_epoch() const = 0;  // fixed; safe from any thread
  virtual bool next_eval(Batch& b) = 0;  // false after the last batch (then rewinds)
  virtual void reset_eval() = 0;
  virtual std::string summary() const = 0;  // counts of what was read, truncated, skipped
};

// The dataset section of a training config, for any batcher (each reads what it needs).
struct DataOptions {
  uint64_t seed = 42;
  int64_t max_seq_length = 1024;
  double mlm_probability = 0.15;    // masked LM
  BatchMode mode = BatchMode::Thd;
  int64_t max_tokens_per_batch = 8192;
  int64_t micro_batch_size = 8;
  int64_t pad_to_multiple_of = 1;
  bool shuffle = true;
  int64_t stride = 200;             // causal LM windows' overlap
  bool uppercase_labels = false;    // causal LM genomic masking
};

// Masked-LM batches (MlmBatcher) and causal-LM windows (CausalLmBatcher) over `data`, which
// must outlive the source, as is `tok`.
std::unique_ptr<BatchSource> make_mlm_source(const DataOptions& o, const SequenceCorpus& data, const Tokenizer& tok);
std::unique_ptr<BatchSource> make_causal_source(const DataOptions& o, const SequenceCorpus& data,
                                                const Tokenizer& tok);

}  // namespace biofm
