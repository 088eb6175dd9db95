#include "biofm/data/batch_source.h"

#include <sstream>

#include "biofm/data/causal.h"
#include "biofm/data/mlm.h"

namespace biofm {

namespace {

std::string describe(const MlmBatcher& b, const SequenceCorpus& d) {
  MlmStats s = b.stats();
  std::ostringstream os;
  os << s.sequences << " sequences seen (" << s.truncated << " truncated to " << b.options().max_seq_length
     << " tokens, " << s.unknown_tokens << " unknown residues), " << d.skipped_records()
     << " records skipped (empty or malformed), epoch " << b.epoch();
  return os.str();
}

std::string describe(const CausalLmBatcher& b, const SequenceCorpus& d) {
  std::ostringstream os;
  os << b.stats().windows << " windows seen, " << d.skipped_records() << " records skipped (empty or malformed), epoch "
     << b.epoch();
  return os.str();
}

// Any batcher with the next/cursor/eval interface (MlmBatcher, CausalLmBatcher).
template <class Batcher, class Options>
class BatcherSource : public BatchSource {
 public:
  BatcherSource(const SequenceCorpus& d, const Options& o, const Tokenizer& tok) : data_(d), b_(d, o, tok) {}
  Batch next() override { return b_.next(); }
  void skip() override { b_.skip(); }
  uint64_t cursor() const override { return b_.cursor(); }
  void set_cursor(uint64_t c) override { b_.set_cursor(c); }
  uint64_t epoch() const override { return b_.epoch(); }
  uint64_t samples_per_epoch() const override { return b_.num_samples(); }
  bool next_eval(Batch& b) override { return b_.next_eval(b); }
  void reset_eval() override { b_.reset_eval(); }
  std::string summary() const override { return describe(b_, data_); }

 private:
  const SequenceCorpus& data_;
  Batcher b_;
};

}  // namespace

std::unique_ptr<BatchSource> make_mlm_source(const DataOptions& d, const SequenceCorpus& data, const Tokenizer& tok) {
  MlmOptions o;
  o.seed = d.seed;
  o.max_seq_length = d.max_seq_length;
  o.mlm_probability = d.mlm_probability;
  o.mode = d.mode;
  o.max_tokens_per_batch = d.max_tokens_per_batch;
  o.micro_batch_size = d.micro_batch_size;
  o.pad_to_multiple_of = d.pad_to_multiple_of;
  o.shuffle = d.shuffle;
  validate(o);
  return std::make_unique<BatcherSource<MlmBatcher, MlmOptions>>(data, o, tok);
}

std::unique_ptr<BatchSource> make_causal_source(const DataOptions& d, const SequenceCorpus& data,
                                                const Tokenizer& tok) {
  CausalLmOptions o;
  o.seed = d.seed;
  o.max_seq_length = d.max_seq_length;
  o.stride = d.stride;
  o.mode = d.mode;
  o.max_tokens_per_batch = d.max_tokens_per_batch;
  o.micro_batch_size = d.micro_batch_size;
  o.pad_to_multiple_of = d.pad_to_multiple_of;
  o.shuffle = d.shuffle;
  o.uppercase_labels = d.uppercase_labels;
  validate(o);
  return std::make_unique<BatcherSource<CausalLmBatcher, CausalLmOptions>>(data, o, tok);
}

}  // namespace biofm
