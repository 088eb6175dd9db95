// SequenceDataset: every record of a file held in memory as one contiguous char buffer plus
// offsets (8 bytes of overhead per sequence, so millions of sequences stay cheap).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "biofm/data/reader.h"

namespace biofm {

struct DatasetStats {
  std::string path;          // "" for in-memory datasets
  std::string format;        // "fasta", "csv", "jsonl", "text" or "memory"
  uint64_t records = 0;      // sequences held
  uint64_t skipped_empty = 0;
  uint64_t bytes = 0;        // total sequence characters held (sum of lengths)
  uint64_t min_length = 0;
  uint64_t max_length = 0;
};

class SequenceDataset {
 public:
  SequenceDataset() = default;
  // Reads the whole file (see reader.h for formats, cleaning and errors).
  static SequenceDataset load(const std::string& path, const ReaderOptions& options = {});
  // From sequences already in memory (cleaned the same way; empty ones skipped and counted).
  static SequenceDataset from_sequences(const std::vector<std::string>& sequences,
                                        bool strip_stop = true);

  uint64_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  bool empty() const { return size() == 0; }
  std::string_view sequence(uint64_t i) const {
    return std::string_view(data_.data() + offsets_[i], size_t(offsets_[i + 1] - offsets_[i]));
  }
  uint64_t length(uint64_t i) const { return offsets_[i + 1] - offsets_[i]; }
  // Record name (FASTA header's first word, or the CSV/JSONL name column); "" when none.
  std::string_view name(uint64_t i) const;
  const DatasetStats& stats() const { return stats_; }

  // Appends one (already cleaned, non-empty) sequence.
  void add(std::string_view sequence, std::string_view name = {});

 private:
  std::string data_;
  std::vector<uint64_t> offsets_{0};
  std::string names_;
  std::vector<uint64_t> name_offsets_{0};
  DatasetStats stats_;
};

}  // namespace biofm
