// ESM-2 masked-LM batches.
//
// Sample k of the stream (global cursor k) is record order(k) (sampler.h), tokenized as
// <cls> SEQ <eos>. A sequence longer than max_seq_length keeps <cls>, its first
// max_seq_length - 2 residues and <eos> (Hugging Face truncation), and is counted.
//
// Masking, as Hugging Face DataCollatorForLanguageModeling does it, but keyed so that any
// batch can be regenerated from (seed, cursor) alone. For the token at position t of the
// sample with global cursor index k, take the Philox block rng_block(seed, Mask, k, t):
//   selected   = u32_to_unit(word0) < mlm_probability   (== rng_uniform(seed, Mask, k, t))
//   u          = u32_to_unit(word1)
//   u < mask_replace_prob                         → <mask> (32)
//   u < mask_replace_prob + random_replace_prob   → (word2 * 33) >> 32, a uniform id in [0, 33)
//                                                   (== rng_below(seed, Mask, k, t, 33); HF draws
//                                                   from the whole vocabulary, specials included)
//   otherwise                                     → unchanged
// labels = the original id at selected positions, -100 elsewhere. Special tokens (<cls>,
// <pad>, <eos>, <unk>, <mask>, HF's all_special_ids) are never selected.
//
// Batching: "thd" packs whole sequences in cursor order while the total stays within
// max_tokens_per_batch (a sequence that does not fit starts the next batch; none is ever
// split); "bshd" takes micro_batch_size sequences and pads them to the longest. See pack.h for
// the layout and pad_to_multiple_of.
//
// Eval: next_eval() walks the dataset once in file order (no shuffle), masking with the fixed
// eval_seed on stream RngStream::Eval keyed by the record index, and returns false after the
// last sequence (the following call starts a new, identical pass).
#pragma once
#include <cstdint>
#include <vector>

#include "biofm/core/rng.h"
#include "biofm/data/batch.h"
#include "biofm/data/corpus.h"
#include "biofm/data/pack.h"
#include "biofm/data/sampler.h"
#include "biofm/data/tokenizer.h"

namespace biofm {

struct MlmOptions {
  uint64_t seed = 42;
  int64_t max_seq_length = 1024;      // tokens, <cls> and <eos> included
  double mlm_probability = 0.15;
  double mask_replace_prob = 0.8;     // of the selected tokens → <mask>
  double random_replace_prob = 0.1;   // of the selected tokens → random id
  BatchMode mode = BatchMode::Thd;
  int64_t max_tokens_per_batch = 8192;  // thd: token budget per batch (after padding)
  int64_t micro_batch_size = 8;         // bshd: sequences per batch
  int64_t pad_to_multiple_of = 0;       // 0/1: off; thd: total rows, bshd: padded length
  bool shuffle = true;
  uint64_t eval_seed = 1234;            // mask seed of next_eval (fixed across runs)
};

// Throws a clear message when the options are inconsistent.
void validate(const MlmOptions& options);

struct MlmStats {
  uint64_t batches = 0;
  uint64_t sequences = 0;       // sequences emitted by next()
  uint64_t truncated = 0;       // of those, cut to max_seq_length
  uint64_t unknown_tokens = 0;  // <unk> ids among the emitted (kept) residues
  uint64_t real_tokens = 0;     // tokens of real sequences (specials included)
  uint64_t label_tokens = 0;    // selected for the loss
  uint64_t padding_tokens = 0;  // padding rows emitted
  uint64_t epochs = 0;          // completed epochs at the current cursor (cursor / N)
};

// Masks one tokenized sequence in place and writes its labels (same length).
// `tok` says which ids are special (never selected), the mask id and the vocabulary size.
void apply_mlm_mask(std::vector<int32_t>& ids, std::vector<int32_t>& labels, uint64_t seed,
                    RngStream stream, uint64_t index, const MlmOptions& options,
                    const Tokenizer& tok = esm_tokenizer());

class MlmBatcher {
 public:
  // Keeps a reference to `dataset`, which must outlive the batcher.
  // `tok` must have a mask token and outlive the batcher.
  MlmBatcher(const SequenceCorpus& dataset, const MlmOptions& options, const Tokenizer& tok = esm_tokenizer());

  Batch next();
  // Moves the cursor past the batch next() would build, from the lengths alone (no tokens,
  // no masking; stats unchanged): data parallelism skips the other ranks' batches this way.
  void skip();
  uint64_t cursor() const { return cursor_; }  // next sample to be emitted
  void set_cursor(uint64_t cursor) { cursor_ = cursor; }
  uint64_t num_samples() const { return dataset_.size(); }  // samples per epoch
  uint64_t epoch() const { return cursor_ / dataset_.size(); }
  // Counters of what next() emitted since construction (set_cursor does not reset them).
  MlmStats stats() const;

  bool next_eval(Batch& batch);
  void reset_eval() { eval_cursor_ = 0; }

  const MlmOptions& options() const { return opt_; }
  const Tokenizer& tokenizer() const { return tok_; }

 private:
  // Tokenizes and masks record `rec`; appends it to builder_. Returns its token count.
  void add_sample(uint64_t rec, uint64_t seed, RngStream stream, uint64_t index, MlmStats* stats);
  int64_t sample_tokens(uint64_t rec) const;
  uint64_t record_at(uint64_t cursor) const;  // the record sample `cursor` reads (resolve())

  const SequenceCorpus& dataset_;
  MlmOptions opt_;
  const Tokenizer& tok_;
  SampleOrder order_;
  uint64_t cursor_ = 0, eval_cursor_ = 0;
  MlmStats stats_;
  BatchBuilder builder_;
  std::vector<int32_t> ids_, labels_;
};

}  // namespace biofm
