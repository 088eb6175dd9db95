// Genomic causal-LM (Llama 3) batches over the nucleotide tokenizer.
//
// Windowing (as Hugging Face return_overflowing_tokens with stride): a sequence of L bases is
// cut into windows of C = max_seq_length - 2 bases, consecutive windows overlapping by
// `stride` bases (step C - stride); each window is wrapped <BOS> ... <EOS>, so it holds at most
// max_seq_length tokens. Windows = 1 if L <= C, else 1 + ceil((L - C) / (C - stride)); the last
// one may be shorter. 50 kb at 8192/200 gives 7 windows. The windows of all records, in file
// order, are the samples; the sample order (sampler.h) permutes windows.
//
// LABEL CONVENTION (already shifted): labels[t] is the target of logits[t], i.e. the model
// computes cross_entropy(logits[t], labels[t]) with no further shift:
//   labels[t] = ids[t + 1]   for t < n - 1 inside a sequence (window) of n tokens,
//   labels[n - 1] = -100     so no loss crosses from one packed sequence into the next.
// This equals Hugging Face's labels = input_ids (shifted inside the model) with the first label
// of each packed sequence set to -100. Genomic masking (OpenGenome2 recipe, on by default):
// a target that is not A/C/G/T/a/c/g/t (so <EOS>, N and other degenerate bases) becomes -100;
// uppercase_labels maps a/c/g/t targets to A/C/G/T. Inputs are never changed.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "biofm/data/batch.h"
#include "biofm/data/corpus.h"
#include "biofm/data/pack.h"
#include "biofm/data/sampler.h"
#include "biofm/data/tokenizer.h"

namespace biofm {

struct CausalLmOptions {
  uint64_t seed = 42;
  int64_t max_seq_length = 8192;        // tokens per window, <BOS> and <EOS> included
  int64_t stride = 200;                 // bases shared by consecutive windows
  BatchMode mode = BatchMode::Thd;
  int64_t max_tokens_per_batch = 8192;  // thd: token budget per batch (after padding)
  int64_t micro_batch_size = 1;         // bshd: windows per batch
  int64_t pad_to_multiple_of = 0;       // 0/1: off
  bool shuffle = true;
  bool genomic_masking = true;          // targets outside ACGTacgt → -100
  bool uppercase_labels = false;        // a/c/g/t targets → A/C/G/T
};

void validate(const CausalLmOptions& options);

struct Window {
  uint64_t start = 0;   // first base
  uint64_t length = 0;  // bases (tokens = length + 2)
};
// Number of windows of a sequence of `length` bases, and the windows themselves.
uint64_t num_windows(uint64_t length, int64_t max_seq_length, int64_t stride);
std::vector<Window> make_windows(uint64_t length, int64_t max_seq_length, int64_t stride);

// Labels of one tokenized window under the convention above.
void causal_labels(const std::vector<int32_t>& ids, std::vector<int32_t>& labels, bool genomic_masking,
                   bool uppercase_labels);

struct CausalLmStats {
  uint64_t batches = 0;
  uint64_t windows = 0;         // windows (samples) emitted
  uint64_t unknown_tokens = 0;  // <UNK> ids among the emitted bases
  uint64_t real_tokens = 0;
  uint64_t label_tokens = 0;
  uint64_t padding_tokens = 0;
  uint64_t epochs = 0;          // completed epochs at the current cursor
};

class CausalLmBatcher {
 public:
  // Keeps a reference to `dataset`, which must outlive the batcher.
  // `tok` must outlive the batcher.
  CausalLmBatcher(const SequenceCorpus& dataset, const CausalLmOptions& options,
                  const Tokenizer& tok = nucleotide_tokenizer());

  Batch next();
  // Moves the cursor past the batch next() would build, from the window lengths alone.
  void skip();
  uint64_t cursor() const { return cursor_; }  // next window (sample) to be emitted
  void set_cursor(uint64_t cursor) { cursor_ = cursor; }
  // Windows per epoch (a stream: unbounded).
  uint64_t num_samples() const { return dataset_.sequential() ? dataset_.size() : window_offsets_.back(); }
  uint64_t epoch() const { return cursor_ / num_samples(); }
  // Counters of what next() emitted since construction (set_cursor does not reset them).
  CausalLmStats stats() const;

  // One pass over all windows in file order; false (and rewinds) after the last one.
  bool next_eval(Batch& batch);
  void reset_eval() { eval_cursor_ = 0; }

  // (record, window) of sample w (file order).
  std::pair<uint64_t, Window> window(uint64_t w) const;
  const CausalLmOptions& options() const { return opt_; }

 private:
  int64_t sample_tokens(uint64_t w) const;
  void add_sample(uint64_t w, CausalLmStats* stats);

  const SequenceCorpus& dataset_;
  CausalLmOptions opt_;
  const Tokenizer& tok_;
  std::vector<uint64_t> window_offsets_;  // first window of each record; size N + 1
  SampleOrder order_;
  uint64_t cursor_ = 0, eval_cursor_ = 0;
  CausalLmStats stats_;
  BatchBuilder builder_;
  std::vector<int32_t> ids_, labels_;
};

}  // namespace biofm
