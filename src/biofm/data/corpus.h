// SequenceCorpus: what the batchers (mlm.h, causal.h) draw samples from — records 0..size()-1
// with their lengths and a way to get a record's token ids. Implemented by SequenceDataset
// (text in memory, tokenized on the fly), PreparedCorpus (tokenized shards of `biofm prepare`,
// memory-mapped), BlendCorpus (several corpora sampled by weight) and StreamingCorpus (raw
// files streamed through a shuffle buffer).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "biofm/data/tokenizer.h"

namespace biofm {

class SequenceCorpus {
 public:
  virtual ~SequenceCorpus() = default;
  virtual uint64_t size() const = 0;                 // records
  virtual uint64_t length(uint64_t i) const = 0;     // residues of record i (no specials)
  // Appends the token ids of residues [start, start + n) of record i (start + n <= length(i))
  // to `out`, as `tok` encodes them; returns how many of them are <unk>.
  virtual uint64_t append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                                 std::vector<int32_t>& out) const = 0;
  // Records dropped while reading (empty sequences, malformed records skipped with
  // dataset.on_error=skip): reported next to what was trained on.
  virtual uint64_t skipped_records() const = 0;
  // "1234 sequences from 3 files", the part of the training banner naming what was read.
  virtual std::string summary() const = 0;
  bool empty() const { return size() == 0; }
  // A stream (data/stream.h): records must be asked for in increasing index order (an earlier
  // one costs a replay), size() is unbounded, and the records already come in training order,
  // so the batchers read them as they come (no permutation, no evaluation pass).
  virtual bool sequential() const { return false; }
  // Cluster sampling (a prepared dataset with a cluster index, data/clusters.h): size() counts
  // clusters, the samples of an epoch, and resolve(sample, epoch) is the record (a member of that
  // cluster, drawn anew each epoch) that length() and append_tokens() then read. Others: itself.
  virtual bool clustered() const { return false; }
  virtual uint64_t resolve(uint64_t sample, uint64_t epoch) const { (void)epoch; return sample; }
};

}  // namespace biofm
