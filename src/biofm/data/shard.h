// One tokenized shard of a prepared dataset (`biofm prepare`, docs/DATA.md): a little-endian
// file of
//   header   64 bytes: magic "BIOFMSH1", u32 version (1), u32 header bytes (64), u64 records,
//            u64 tokens, u64 offsets position, u64 tokens position, 16 zero bytes
//   offsets  u64[records + 1]: record r's tokens are tokens[offsets[r], offsets[r+1])
//   tokens   u8[tokens]: residue token ids, without <cls>/<eos> (<BOS>/<EOS>): the batchers
//            add those. One byte per token is enough for both tokenizers (ESM-2: 33 ids;
//            nucleotide: 256 ids, one per byte).
// Shards are written whole (temporary name, fsync, rename) and read by memory map; every read
// of an offset is bounds-checked, so a corrupt shard gives an error naming it, never a bad read.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "biofm/io/stream_file.h"

namespace biofm {

constexpr char kShardMagic[8] = {'B', 'I', 'O', 'F', 'M', 'S', 'H', '1'};
constexpr uint32_t kShardVersion = 1;
constexpr uint64_t kShardHeaderBytes = 64;

// Collects records in memory (bounded by the caller's shard size) and writes the shard file.
class ShardWriter {
 public:
  void add(const uint8_t* ids, size_t n);
  uint64_t records() const { return offsets_.size() - 1; }
  uint64_t tokens() const { return tokens_.size(); }
  uint64_t file_bytes() const { return kShardHeaderBytes + 8 * offsets_.size() + tokens_.size(); }
  // Writes path atomically, returns its size and CRC32, and empties the writer.
  FileDigest write(const std::string& path);

 private:
  std::vector<uint64_t> offsets_{0};
  std::vector<uint8_t> tokens_;
};

// A shard file mapped read-only. The constructor checks the magic, version and that the
// header's counts match the file size; record() checks each offset it reads.
class ShardView {
 public:
  explicit ShardView(const std::string& path);
  uint64_t records() const { return records_; }
  uint64_t tokens() const { return tokens_; }
  uint64_t file_bytes() const { return map_->size(); }
  const std::string& path() const { return map_->path(); }
  // Token ids of record r (r < records()).
  std::span<const uint8_t> record(uint64_t r) const;
  uint64_t length(uint64_t r) const { return record(r).size(); }
  uint32_t crc32() const { return map_->crc32(); }

 private:
  std::unique_ptr<MappedFile> map_;
  uint64_t records_ = 0, tokens_ = 0;
  const uint64_t* offsets_ = nullptr;  // records_ + 1 entries (8-byte aligned: after the header)
  const uint8_t* data_ = nullptr;
};

}  // namespace biofm
