// StreamingCorpus: raw sequence files read as a stream, for users who skip `biofm prepare`
// (dataset.streaming: true). Memory holds the shuffle buffer and one batch's worth of samples,
// never the dataset.
//
// The stream is a pure function of (input spec, seed, options): the files are read in order
// (with shuffle: in a seeded order per pass over them), pass after pass without end; each
// record (for causal LM: each window of a record, cut as causal.h cuts them) enters a buffer of
// `buffer` items, and sample k is the buffer slot rng_below(seed, StreamBuffer, k) — whose place
// the next item read then takes (Hugging Face's IterableDataset.shuffle, made counter-based).
// Without shuffle, sample k is simply the k-th item read.
//
// Samples are asked for in increasing index order (the batchers' cursor), so the corpus keeps
// only the samples from the last one asked for onwards. Asking for an earlier sample (a resume,
// set_cursor) replays the stream from its start: reading, not tokenizing, up to there.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "biofm/data/alphabet.h"
#include "biofm/data/corpus.h"
#include "biofm/data/reader.h"

namespace biofm {

struct StreamOptions {
  ReaderOptions reader;        // format, column, skip_malformed (max_records is not used)
  uint64_t seed = 42;
  bool shuffle = true;         // false: file order, no buffer
  uint64_t buffer = 10000;     // shuffle buffer, in items (records or windows); >= 1
  // Causal LM: cut each record into windows (causal.h) before the buffer, so that the windows
  // of one long genome are spread out like any other samples. 0 = whole records (masked LM).
  int64_t window_max_seq_length = 0;
  int64_t window_stride = 0;
  // When set: the first pass over the files counts these characters (data/alphabet.h) and notes
  // them once, when it ends.
  std::optional<ResidueTally> alphabet;
};

struct DataOptions;
// The stream a batcher with options `d` reads: seed and shuffle from `d`; for a causal model
// (`causal`) records cut into d's windows.
StreamOptions stream_options(const DataOptions& d, bool causal, uint64_t buffer, const ReaderOptions& reader = {});

class StreamingCorpus : public SequenceCorpus {
 public:
  // Checks that every file of `spec` exists (expand_inputs); reading starts at the first sample.
  StreamingCorpus(const std::string& spec, const StreamOptions& options);
  ~StreamingCorpus() override;

  static constexpr uint64_t kUnbounded = (uint64_t(1) << 62) - 1;  // (SampleOrder's limit)
  uint64_t size() const override { return kUnbounded; }
  bool sequential() const override { return true; }
  uint64_t length(uint64_t i) const override { return sample(i).size(); }
  uint64_t append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                         std::vector<int32_t>& out) const override;
  uint64_t skipped_records() const override { return skipped_; }
  std::string summary() const override;

  uint64_t passes() const { return pass_; }              // completed passes over the files
  uint64_t records_read() const { return records_read_; }  // over all passes
  uint64_t resident_items() const { return buffer_.size() + pending_.size() + window_.size(); }
  uint64_t replays() const { return replays_; }          // restarts from the stream's start

 private:
  const std::string& sample(uint64_t i) const;  // advances the stream to sample i
  std::string next_item() const;               // the next record (or window) read
  std::string next_sample(uint64_t k) const;   // sample k, through the shuffle buffer
  void open_next_file() const;
  void restart() const;

  std::string spec_;
  StreamOptions opt_;
  std::vector<std::string> files_;
  uint64_t skipped_files_ = 0;
  // The stream's state (mutable: the corpus interface is const; one reader at a time).
  mutable std::unique_ptr<SequenceReader> reader_;
  mutable uint64_t file_ = 0, records_in_pass_ = 0;
  // (atomic: the trainer prints summary() while its loader thread reads on)
  mutable std::atomic<uint64_t> pass_{0}, records_read_{0}, skipped_{0}, replays_{0};
  mutable std::deque<std::string> pending_;  // windows of the record read last
  mutable std::vector<std::string> buffer_;  // the shuffle buffer
  mutable std::deque<std::string> window_;   // samples base_ .. base_ + size - 1
  mutable uint64_t base_ = 0;
  mutable SequenceRecord rec_;
  mutable std::optional<ResidueTally> alphabet_;  // the first pass's counts (options.alphabet)
  mutable bool alphabet_noted_ = false;
};

}  // namespace biofm
