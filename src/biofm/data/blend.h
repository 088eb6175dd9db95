// BlendCorpus: several corpora sampled by weight (dataset.weights, the OpenGenome2 mixture),
// deterministically and without a table per record.
//
// With N = the total records of all sources and W the sum of the weights, source s gets
// n_s = round(w_s / W * N) slots (at least 1 when w_s > 0), laid end to end: record i of the
// blend is slot j = i - first_s of source s, which reads source record
// permute_index(j mod size_s, size_s, key_s, j / size_s) (sampler.h) — a source weighted above
// its size is repeated, each pass in another order; one weighted below it contributes a fixed,
// seeded subset of n_s records. The training order (sampler.h) then shuffles the blend's
// records, so every stretch of the stream holds the sources in proportion to their weights.
// Weights count records (samples), not tokens.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "biofm/data/corpus.h"

namespace biofm {

class BlendCorpus : public SequenceCorpus {
 public:
  // names label the sources in summary(); weights >= 0, not all 0.
  BlendCorpus(std::vector<std::unique_ptr<SequenceCorpus>> sources, std::vector<double> weights,
              std::vector<std::string> names, uint64_t seed);

  uint64_t size() const override { return first_.back(); }
  uint64_t length(uint64_t i) const override;
  uint64_t append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                         std::vector<int32_t>& out) const override;
  uint64_t skipped_records() const override;
  std::string summary() const override;

  // (source, source record) of blend record i.
  std::pair<size_t, uint64_t> locate(uint64_t i) const;
  uint64_t slots(size_t s) const { return first_[s + 1] - first_[s]; }

 private:
  std::vector<std::unique_ptr<SequenceCorpus>> sources_;
  std::vector<double> weights_;
  std::vector<std::string> names_;
  std::vector<uint64_t> first_;  // first blend record of each source; size sources + 1
  uint64_t seed_;
};

}  // namespace biofm
