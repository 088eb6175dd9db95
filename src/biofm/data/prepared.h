// A prepared dataset (the output directory of `biofm prepare`) read for training: the shards
// of one split, memory-mapped. Memory does not grow with the data: the corpus holds one
// ShardView and one cumulative record count per shard; the pages of the mappings are the
// kernel's page cache. See docs/DATA.md ("Prepared datasets") for the layout.
#pragma once
#include <atomic>
#include <memory>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

#include "biofm/data/clusters.h"
#include "biofm/data/corpus.h"
#include "biofm/data/shard.h"

namespace biofm {

constexpr const char* kPreparedManifest = "manifest.json";
constexpr int kPreparedFormatVersion = 1;

// "esm" (EsmTokenizer) or "nucleotide" (NucleotideTokenizer): the tokenizer names prepared
// manifests use.
std::string tokenizer_name(const Tokenizer& tok);
const Tokenizer& tokenizer_named(const std::string& name);  // throws listing the names

// True when `path` is a directory holding a prepared manifest.
bool is_prepared_dir(const std::string& path);

struct PreparedOpenOptions {
  std::string split = "train";  // train | val | test
  bool verify_checksums = true;   // CRC32 of every shard against the manifest (reads them once)
  // The CRC32 check on a background thread: the constructor returns at once (a 10^8-record set
  // starts in milliseconds) and a mismatch, once found, fails the next read naming the shard.
  bool verify_in_background = false;
  // A split with a cluster index (prepare --cluster-column): one sample per cluster per epoch,
  // the member drawn from (seed, cluster, epoch). false: every record is a sample.
  bool cluster_sampling = true;
  uint64_t seed = 42;
};

// Fails unless the prepared directory `c` (opened from `dir`) was tokenized with `expected`;
// `user` names who needs it ("model.family llama", "the model", "--family esm2"), and the
// message says how to prepare the data for it.
void require_prepared_tokenizer(const class PreparedCorpus& c, const std::string& dir, const Tokenizer& expected,
                                const std::string& user);

class SequenceDataset;
// The records of a prepared split as a SequenceDataset (residue text decoded from the token
// ids; an <unk> comes back as a character the tokenizer maps to <unk> again), named
// "<split>:<index>": what embed / eval / score read when --input is a prepared directory.
// Memory holds the split's text, as reading a file would. Checks the CRC32s first, and that the
// directory was tokenized with `expected` (the model's tokenizer).
SequenceDataset read_prepared_split(const std::string& dir, const std::string& split, const Tokenizer& expected);
// The character read_prepared_split decodes each token id of `tok` to (indexed by id): the
// residue's, or for <unk> (and any id whose text is not one character) one that `tok` maps to
// <unk> again. For readers that decode records a piece at a time (infer/input.h).
std::string prepared_residue_chars(const Tokenizer& tok);

class PreparedCorpus : public SequenceCorpus {
 public:
  // Opens DIR/manifest.json and the split's shards; any mismatch with the manifest (missing
  // shard, size, header counts, CRC32) is an error naming the shard.
  PreparedCorpus(const std::string& dir, const PreparedOpenOptions& o = {});
  ~PreparedCorpus() override;
  PreparedCorpus(const PreparedCorpus&) = delete;
  PreparedCorpus& operator=(const PreparedCorpus&) = delete;

  uint64_t size() const override { return clusters_ ? clusters_->clusters() : records_; }
  bool clustered() const override { return clusters_ != nullptr; }
  uint64_t resolve(uint64_t sample, uint64_t epoch) const override;
  uint64_t records() const { return records_; }
  uint64_t length(uint64_t i) const override;
  uint64_t append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                         std::vector<int32_t>& out) const override;
  uint64_t skipped_records() const override { return skipped_; }
  std::string summary() const override;

  const std::string& tokenizer() const { return tokenizer_; }  // "esm" | "nucleotide"
  uint64_t tokens() const { return tokens_; }
  size_t shards() const { return shards_.size(); }
  // Waits for a background CRC32 check and throws if it found a corrupt shard.
  void wait_verified();

 private:
  std::pair<const ShardView*, uint64_t> locate(uint64_t i) const;
  // CRC32 of every shard on all cores; sets bad_shard_ to the first mismatch.
  void verify(std::vector<uint32_t> want_crc, uint32_t clusters_crc);
  void check_verified() const {
    if (bad_shard_.load(std::memory_order_relaxed) != -1) fail_corrupt();
  }
  [[noreturn]] void fail_corrupt() const;

  std::string dir_, split_, tokenizer_;
  std::vector<ShardView> shards_;
  std::vector<uint64_t> first_;  // first global record of each shard; size shards + 1
  uint64_t records_ = 0, tokens_ = 0, skipped_ = 0;
  std::unique_ptr<ClusterIndex> clusters_;
  uint64_t seed_ = 42;
  std::atomic<int64_t> bad_shard_{-1};  // (-2: the cluster index)
  std::atomic<bool> stop_{false};
  std::thread verifier_;
};

}  // namespace biofm
