// The input of the inference commands (embed, score, eval) read as a stream, a piece at a time,
// so that memory holds one piece of records, never the whole input (10 million proteins are
// gigabytes of text).
//
// InputStream reads --input forward: the files of an input spec (input_files.h) through the
// same SequenceReader that SequenceDataset::load uses (same formats, cleaning, errors and
// counts), or the split of a `biofm prepare` directory through PreparedCorpus (memory-mapped
// shards, decoded back to residue text as read_prepared_split does, named "<split>:<index>").
// A record without a name (CSV, TSV, JSONL without a name column; plain text) is named
// "record:<index>", its 0-based place in the input (its row in the outputs).
// The commands make two passes: scan() counts the records (and whatever the caller sums from
// each sequence: tokens for the progress line, truncations, the alphabet check) keeping nothing,
// then the work reads the records again piece by piece; skip() passes over records without
// keeping them (a resumed run's finished pieces, another rank's pieces).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "biofm/data/corpus.h"
#include "biofm/data/dataset.h"
#include "biofm/data/reader.h"
#include "biofm/data/tokenizer.h"
#include "biofm/infer/fingerprint.h"

namespace biofm::infer {

class InputStream {
 public:
  // The files of `spec` (expand_inputs: a file, directory, glob or list), read in order with
  // `options` (a format given there applies to every file, else each file's extension picks).
  // Opens the first file at once (a missing file is an error here).
  static InputStream files(const std::string& spec, const ReaderOptions& options = {});
  // Split `split` of a prepared directory, whose tokenizer must be `expected` (the model's).
  // Checks the shards' CRC32s once, here.
  static InputStream prepared(const std::string& dir, const std::string& split, const Tokenizer& expected);
  ~InputStream();
  InputStream(InputStream&&) noexcept;
  InputStream& operator=(InputStream&&) noexcept;

  // Replaces `out` with the next records, at most `count` of them (fewer only at the end of the
  // input); returns how many. Record position() + i of the input becomes out's record i.
  uint64_t read(uint64_t count, SequenceDataset& out);
  // Passes over at most `count` records without keeping them (files: parsed, one record held at
  // a time; prepared: free); returns how many.
  uint64_t skip(uint64_t count);
  // Records read or skipped since the start (or the last rewind()).
  uint64_t position() const { return position_; }
  // Back to the first record (files are opened again).
  void rewind();
  // What was passed so far (read or skipped): records, lengths, files, formats, empty and
  // malformed records skipped (a file's counts once it has been read to its end). After a pass to
  // the end (scan), the same numbers SequenceDataset::load reports for the input.
  const DatasetStats& stats() const { return stats_; }

 private:
  InputStream() = default;
  bool next(SequenceRecord& rec);  // the next record (files), false at the end
  void close_file();               // adds the current file's counts
  void count(uint64_t length);

  struct Files;
  struct Prepared;
  std::unique_ptr<Files> files_;
  std::unique_ptr<Prepared> prepared_;
  uint64_t position_ = 0;
  DatasetStats stats_;
};

// Record names that appear more than once: outputs keyed by name (names.tsv, the names list of
// a safetensors file, score's and eval's rows) keep every record in input order, but a name no
// longer tells which one a row is. Names are kept as 64-bit hashes in an open-addressing table
// (8 bytes a slot, at most half full: 16 to 32 bytes a record).
class DuplicateNames {
 public:
  void add(std::string_view name);
  uint64_t names() const { return names_; }  // distinct names seen more than once
  // "" when none; else "<input>: N record names appear more than once; first duplicate: 'X'; rows
  // keep input order (...)".
  std::string note(const std::string& input) const;

 private:
  class HashSet {
   public:
    bool insert(uint64_t h);  // false when `h` was there already
   private:
    std::vector<uint64_t> slots_;  // 0: empty
    size_t used_ = 0;
  };
  HashSet seen_, repeated_;
  uint64_t names_ = 0;
  std::string first_;
};

// One pass over the whole input (from its start, rewound again after): visit(index, sequence) for
// every record, read `piece` records at a time. Returns the stats of the pass (stats.records is
// the record count). A file holding no sequence, or any read error, throws as loading would.
// fingerprint (optional) takes every record's name and sequence. Names that appear more than once
// are said in a note (core/notes.h; DuplicateNames).
DatasetStats scan(InputStream& in, const std::function<void(uint64_t, std::string_view)>& visit,
                  uint64_t piece = 10000, RecordsFingerprint* fingerprint = nullptr);

// The input as a SequenceCorpus of `records` records (a scan's count) for a batcher that asks
// for them in increasing order (MlmBatcher::next_eval, eval's windows): the stream is read
// `piece` records at a time as the records are asked for; the piece read last and the one before
// stay in memory, and asking for a record before those is an error.
class StreamedCorpus : public SequenceCorpus {
 public:
  StreamedCorpus(InputStream& in, uint64_t records, uint64_t piece, std::string summary = {});
  uint64_t size() const override { return records_; }
  uint64_t length(uint64_t i) const override;
  uint64_t append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                         std::vector<int32_t>& out) const override;
  uint64_t skipped_records() const override { return 0; }
  std::string summary() const override { return summary_; }
  std::string_view sequence(uint64_t i) const;
  std::string_view name(uint64_t i) const;
  // Records held now (at most two pieces).
  uint64_t resident() const { return prev_.size() + cur_.size(); }

 private:
  // The piece holding record i, and i's index in it.
  std::pair<const SequenceDataset*, uint64_t> at(uint64_t i) const;

  InputStream& in_;
  uint64_t records_, piece_;
  std::string summary_;
  // (mutable: the corpus interface is const; one reader at a time)
  mutable SequenceDataset prev_, cur_;
  mutable uint64_t prev_first_ = 0, cur_first_ = 0;
};

}  // namespace biofm::infer
