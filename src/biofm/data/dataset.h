// SequenceDataset: every record of the input held in memory as one contiguous char buffer plus
// offsets (8 bytes of overhead per sequence, so millions of sequences stay cheap). The input is
// a file, a directory, a glob or a list of these (input_files.h), read in order and concatenated.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "biofm/data/corpus.h"
#include "biofm/data/reader.h"

namespace biofm {

struct DatasetStats {
  std::string path;          // the input spec as given; "" for in-memory datasets
  std::string format;        // "fasta", "csv", "tsv", "jsonl", "text", "memory", or several
                             // joined by '+' ("fasta+jsonl") when the files differ
  uint64_t files = 0;        // files read
  uint64_t skipped_files = 0;  // directory entries skipped for an unrecognised extension
  uint64_t records = 0;      // sequences held
  uint64_t skipped_empty = 0;
  uint64_t skipped_malformed = 0;  // malformed records / unreadable file tails skipped (on_error skip)
  std::string first_error;         // the first of those (file:line: what)
  uint64_t bytes = 0;        // total sequence characters held (sum of lengths)
  uint64_t min_length = 0;
  uint64_t max_length = 0;

  // "1234 sequences", plus " from 3 files (2 skipped: unknown extension)" when more than one
  // file was read or any was skipped: the part of the summary lines users see.
  std::string summary() const;
};

class SequenceDataset : public SequenceCorpus {
 public:
  SequenceDataset() = default;
  // Reads every file of the input spec (input_files.h) in order (see reader.h for formats,
  // cleaning and errors); each file's format comes from its own extension unless
  // options.format names one. max_records counts over all files.
  static SequenceDataset load(const std::string& spec, const ReaderOptions& options = {});
  // From sequences already in memory (cleaned the same way; empty ones skipped and counted).
  static SequenceDataset from_sequences(const std::vector<std::string>& sequences,
                                        bool strip_stop = true);

  uint64_t size() const override { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  std::string_view sequence(uint64_t i) const {
    return std::string_view(data_.data() + offsets_[i], size_t(offsets_[i + 1] - offsets_[i]));
  }
  uint64_t length(uint64_t i) const override { return offsets_[i + 1] - offsets_[i]; }
  uint64_t append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                         std::vector<int32_t>& out) const override {
    return tok.encode_residues(sequence(i).substr(size_t(start), size_t(n)), out);
  }
  uint64_t skipped_records() const override { return stats_.skipped_empty + stats_.skipped_malformed; }
  std::string summary() const override { return stats_.summary(); }
  // Record name (FASTA header's first word, or the CSV/JSONL name column); "" when none.
  std::string_view name(uint64_t i) const;
  const DatasetStats& stats() const { return stats_; }

  // Appends one (already cleaned, non-empty) sequence; an empty one only with may_be_empty (the
  // inference commands' input read with ReaderOptions::keep_empty, a row per record).
  void add(std::string_view sequence, std::string_view name = {}, bool may_be_empty = false);

 private:
  std::string data_;
  std::vector<uint64_t> offsets_{0};
  std::string names_;
  std::vector<uint64_t> name_offsets_{0};
  DatasetStats stats_;
};

}  // namespace biofm
