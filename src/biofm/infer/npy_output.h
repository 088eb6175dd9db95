// Per-record results as NumPy arrays: DIR/<tensor>.npy, one array per tensor with the records
// as its first axis ([total_records, ...] in input order), plus DIR/names.tsv (row, name) and
// DIR/index.json. Each .npy file is created at its full size when the first piece arrives and
// every piece is written at its rows' offset, so memory holds one piece and 10 million records
// make one file a user loads with numpy.load(..., mmap_mode="r"). Resumable: DIR/progress.json
// lists the pieces already on disk (rewritten atomically after their rows are flushed); the same
// command after a kill skips them, and a directory written by a different command is refused.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "biofm/core/tensor.h"
#include "biofm/infer/run_key.h"

namespace biofm {
class AtomicFileWriter;
}

namespace biofm::infer {

class NpyOutput {
 public:
  // run_key: compared with the directory's on resume (RunKey::matches).
  NpyOutput(std::string dir, RunKey run_key, int64_t piece_records, int64_t total_records);
  int64_t chunk_records() const { return chunk_; }
  // Whether the piece holding records [first, first + n) is on disk from an earlier run.
  bool have(int64_t first, int64_t n) const;
  // Writes the piece: every tensor is [n, ...] (F32, I32 or I64; BF16 is widened to F32).
  void write(int64_t first, int64_t n, const std::map<std::string, Tensor>& tensors);
  // names.tsv (row, then name; tabs and newlines in names become spaces) and index.json.
  void finish(const std::vector<std::string>& names, const std::string& summary_json) const;
  // index.json only, once names.tsv is on disk (NamesTsv, for a caller streaming the names).
  void finish(const std::string& summary_json) const;

 private:
  struct Array {
    std::string descr;            // numpy dtype, e.g. "<f4"
    std::vector<int64_t> shape;   // [total, ...]
    int64_t row_bytes = 0;
    int64_t data_offset = 0;      // header length
  };
  std::string file_of(const std::string& tensor) const;
  void save_progress() const;

  std::string dir_;
  RunKey run_key_;
  int64_t chunk_, total_;
  std::map<std::string, Array> arrays_;
  std::vector<int64_t> done_;  // first record of each piece on disk
};

// DIR/names.tsv written as the records go by, so that no list of every name is held: row, then
// name (tabs and line breaks in names become spaces), under a temporary name until commit().
class NamesTsv {
 public:
  explicit NamesTsv(const std::string& dir);
  ~NamesTsv();
  void add(std::string_view name);  // the next row's name
  void commit();                    // renames it names.tsv
  int64_t rows() const { return row_; }

 private:
  std::unique_ptr<AtomicFileWriter> file_;
  std::string buf_;
  int64_t row_ = 0;
};

// The .npy (format 1.0) header for a C-order array of that dtype and shape, padded so that the
// data starts on a 64-byte boundary.
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);

}  // namespace biofm::infer
