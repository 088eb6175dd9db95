#include "biofm/train/batch_source.h"

#include <sstream>

#include "biofm/data/causal.h"
#include "biofm/data/mlm.h"

namespace biofm {

namespace {

class MlmSource : public BatchSource {
 public:
  MlmSource(const SequenceDataset& d, const MlmOptions& o) : data_(d), b_(d, o) {}
  Batch next() override { return b_.next(); }
  uint64_t cursor() const override { return b_.cursor(); }
  void set_cursor(uint64_t c) override { b_.set_cursor(c); }
  uint64_t epoch() const override { return b_.epoch(); }
  uint64_t samples_per_epoch() const override { return b_.num_samples(); }
  bool next_eval(Batch& b) override { return b_.next_eval(b); }
  void reset_eval() override { b_.reset_eval(); }
  std::string summary() const override {
    MlmStats s = b_.stats();
    std::ostringstream os;
    os << s.sequences << " sequences seen (" << s.truncated << " truncated to "
       << b_.options().max_seq_length << " tokens, " << s.unknown_tokens << " unknown residues), "
       << data_.stats().skipped_empty << " empty records skipped, epoch " << b_.epoch();
    return os.str();
  }

 private:
  const SequenceDataset& data_;
  MlmBatcher b_;
};

class CausalSource : public BatchSource {
 public:
  CausalSource(const SequenceDataset& d, const CausalLmOptions& o) : data_(d), b_(d, o) {}
  Batch next() override { return b_.next(); }
  uint64_t cursor() const override { return b_.cursor(); }
  void set_cursor(uint64_t c) override { b_.set_cursor(c); }
  uint64_t epoch() const override { return b_.epoch(); }
  uint64_t samples_per_epoch() const override { return b_.num_samples(); }
  bool next_eval(Batch& b) override { return b_.next_eval(b); }
  void reset_eval() override { b_.reset_eval(); }
  std::string summary() const override {
    CausalLmStats s = b_.stats();
    std::ostringstream os;
    os << s.windows << " windows seen, " << data_.stats().skipped_empty
       << " empty records skipped, epoch " << b_.epoch();
    return os.str();
  }

 private:
  const SequenceDataset& data_;
  CausalLmBatcher b_;
};

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const TrainConfig& cfg, const SequenceDataset& data) {
  const auto& d = cfg.dataset;
  if (cfg.model.family == "esm2") {
    MlmOptions o;
    o.seed = uint64_t(cfg.seed);
    o.max_seq_length = d.max_seq_length;
    o.mlm_probability = d.mlm_probability;
    o.mode = parse_batch_mode(d.packing);
    o.max_tokens_per_batch = d.max_tokens_per_batch;
    o.micro_batch_size = d.micro_batch_size;
    o.pad_to_multiple_of = d.pad_to_multiple_of;
    o.shuffle = d.shuffle;
    validate(o);
    return std::make_unique<MlmSource>(data, o);
  }
  if (cfg.model.family == "llama") {
    CausalLmOptions o;
    o.seed = uint64_t(cfg.seed);
    o.max_seq_length = d.max_seq_length;
    o.stride = d.stride;
    o.mode = parse_batch_mode(d.packing);
    o.max_tokens_per_batch = d.max_tokens_per_batch;
    o.micro_batch_size = d.micro_batch_size;
    o.pad_to_multiple_of = d.pad_to_multiple_of;
    o.shuffle = d.shuffle;
    o.uppercase_labels = d.uppercase_labels;
    validate(o);
    return std::make_unique<CausalSource>(data, o);
  }
  fail("model.family '", cfg.model.family, "' has no data pipeline");
}

}  // namespace biofm
