#include "biofm/data/shard.h"

#include <sys/mman.h>

#include <cstring>

#include "biofm/core/error.h"

namespace biofm {

namespace {

struct ShardHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t records;
  uint64_t tokens;
  uint64_t offsets_pos;
  uint64_t tokens_pos;
  uint8_t reserved[16];
};
static_assert(sizeof(ShardHeader) == kShardHeaderBytes);

}  // namespace

void ShardWriter::add(const uint8_t* ids, size_t n) {
  tokens_.insert(tokens_.end(), ids, ids + n);
  offsets_.push_back(tokens_.size());
}

FileDigest ShardWriter::write(const std::string& path) {
  ShardHeader h{};
  std::memcpy(h.magic, kShardMagic, 8);
  h.version = kShardVersion;
  h.header_bytes = uint32_t(kShardHeaderBytes);
  h.records = records();
  h.tokens = tokens();
  h.offsets_pos = kShardHeaderBytes;
  h.tokens_pos = kShardHeaderBytes + 8 * offsets_.size();
  AtomicFileWriter w(path);
  w.write(&h, sizeof h);
  w.write(offsets_.data(), 8 * offsets_.size());
  if (!tokens_.empty()) w.write(tokens_.data(), tokens_.size());
  w.commit();
  offsets_.assign(1, 0);
  tokens_.clear();
  return {w.bytes(), w.crc32()};
}

ShardView::ShardView(const std::string& path) : map_(std::make_unique<MappedFile>(path)) {
  const size_t size = map_->size();
  if (size < kShardHeaderBytes) fail("corrupt shard ", path, ": ", size, " bytes, shorter than its header");
  ShardHeader h;
  std::memcpy(&h, map_->data(), sizeof h);
  if (std::memcmp(h.magic, kShardMagic, 8) != 0) fail("corrupt shard ", path, ": not a biofm shard (bad magic)");
  if (h.version != kShardVersion)
    fail("shard ", path, " has format version ", h.version, "; this biofm reads version ", kShardVersion);
  // Every size is checked against the file before any pointer is formed (no overflow: records
  // and tokens are each bounded by the file size first).
  if (h.header_bytes != kShardHeaderBytes || h.offsets_pos != kShardHeaderBytes || h.records >= size / 8 ||
      h.tokens > size || h.tokens_pos != kShardHeaderBytes + 8 * (h.records + 1) ||
      h.tokens_pos + h.tokens != size)
    fail("corrupt shard ", path, ": header (", h.records, " records, ", h.tokens,
         " tokens) does not match the file size (", size, " bytes)");
  records_ = h.records;
  tokens_ = h.tokens;
  offsets_ = reinterpret_cast<const uint64_t*>(map_->data() + h.offsets_pos);
  data_ = reinterpret_cast<const uint8_t*>(map_->data() + h.tokens_pos);
  if (offsets_[0] != 0 || offsets_[records_] != tokens_)
    fail("corrupt shard ", path, ": the offsets index does not span the token buffer");
  // Training reads records in a shuffled order: no sequential read-ahead.
  ::madvise(const_cast<char*>(map_->data()), size, MADV_RANDOM);
}

std::span<const uint8_t> ShardView::record(uint64_t r) const {
  BIOFM_CHECK(r < records_, "record ", r, " of shard ", path(), " with ", records_);
  const uint64_t a = offsets_[r], b = offsets_[r + 1];
  if (a > b || b > tokens_)
    fail("corrupt shard ", path(), ": record ", r, " has offsets [", a, ", ", b, ") outside its ", tokens_,
         " tokens");
  return {data_ + a, size_t(b - a)};
}

}  // namespace biofm
