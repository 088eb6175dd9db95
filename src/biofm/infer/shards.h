// Where a command's per-record results go: one safetensors file written at the end (a path
// ending in .safetensors), or a directory of shards of a fixed number of records written as
// they complete, so memory does not grow with the input. A shard is written under a temporary
// name and renamed (io/atomic_file), so a killed run leaves only complete shards; running the
// same command again skips them (a shard made by a different command is an error, not reused).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "biofm/core/tensor.h"
#include "biofm/infer/run_key.h"

namespace biofm::infer {

class ShardedOutput {
 public:
  // run_key: what makes two runs' shards interchangeable (model, input, options); stored in
  // every shard and compared on resume (RunKey::matches).
  ShardedOutput(std::string path, RunKey run_key, int64_t shard_size, int64_t total_records);
  bool single_file() const { return single_; }
  // Records per piece of work: the shard size, or everything for a single file.
  int64_t chunk_records() const { return chunk_; }
  // The file of the shard holding records [first, ...).
  std::string shard_path(int64_t first) const;
  // Whether that shard is on disk from an earlier run of the same command (complete: shards
  // appear only by rename). A shard from another command throws, naming it.
  // `metadata`, when given, receives the shard's metadata (read with the same mapping).
  bool have(int64_t first, int64_t n, std::map<std::string, std::string>* metadata = nullptr) const;
  // Writes the piece holding records [first, first + n) (names: a JSON list, in the metadata).
  void write(int64_t first, int64_t n, const std::map<std::string, Tensor>& tensors, const std::string& names_json,
             std::map<std::string, std::string> metadata) const;
  // Directory output: index.json (the shards, their record ranges, `summary`), written last.
  void finish(const std::string& summary_json) const;

 private:
  std::string path_;
  RunKey run_key_;
  bool single_;
  int64_t chunk_, total_;
};

}  // namespace biofm::infer
