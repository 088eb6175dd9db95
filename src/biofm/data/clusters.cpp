#include "biofm/data/clusters.h"

#include <algorithm>
#include <cstring>

#include "biofm/core/error.h"

namespace biofm {

namespace {
constexpr char kMagic[8] = {'B', 'I', 'O', 'F', 'M', 'C', 'L', '1'};
constexpr size_t kHeader = 24;
}  // namespace

std::pair<FileDigest, uint64_t> write_cluster_index(const std::string& path,
                                                    std::vector<std::pair<uint64_t, uint64_t>> keyed) {
  std::sort(keyed.begin(), keyed.end());
  std::vector<uint64_t> offsets{0};
  for (size_t i = 0; i < keyed.size(); ++i)
    if (i + 1 == keyed.size() || keyed[i + 1].first != keyed[i].first) offsets.push_back(i + 1);
  const uint64_t clusters = offsets.size() - 1, members = keyed.size();
  AtomicFileWriter w(path);
  w.write(kMagic, sizeof kMagic);
  w.write(&clusters, 8);
  w.write(&members, 8);
  w.write(offsets.data(), offsets.size() * 8);
  std::vector<uint64_t> chunk;
  chunk.reserve(1 << 16);
  for (size_t i = 0; i < keyed.size(); ++i) {
    chunk.push_back(keyed[i].second);
    if (chunk.size() == chunk.capacity() || i + 1 == keyed.size()) {
      w.write(chunk.data(), chunk.size() * 8);
      chunk.clear();
    }
  }
  w.commit();
  return {FileDigest{w.bytes(), w.crc32()}, clusters};
}

ClusterIndex::ClusterIndex(const std::string& path, uint64_t records) : records_(records) {
  map_ = std::make_unique<MappedFile>(path);
  const char* p = map_->data();
  const size_t n = map_->size();
  if (n < kHeader || std::memcmp(p, kMagic, 8) != 0) fail("corrupt cluster index ", path, ": not a biofm cluster index");
  uint64_t members = 0;
  std::memcpy(&clusters_, p + 8, 8);
  std::memcpy(&members, p + 16, 8);
  if (clusters_ > n / 8 || members > n / 8 || n != kHeader + 8 * (clusters_ + 1 + members))
    fail("corrupt cluster index ", path, ": ", n, " bytes do not hold ", clusters_, " clusters and ", members, " members");
  if (members != records)
    fail("corrupt cluster index ", path, ": ", members, " members for a split of ", records, " records");
  offsets_ = reinterpret_cast<const uint64_t*>(p + kHeader);  // 8-byte aligned: page + 24
  members_ = offsets_ + clusters_ + 1;
  if (offsets_[0] != 0 || offsets_[clusters_] != members)
    fail("corrupt cluster index ", path, ": the offsets do not span the members");
  for (uint64_t c = 0; c < clusters_; ++c)
    if (offsets_[c + 1] <= offsets_[c]) fail("corrupt cluster index ", path, ": cluster ", c, " is empty or out of order");
}

uint64_t ClusterIndex::member(uint64_t c, uint64_t j) const {
  BIOFM_CHECK(c < clusters_ && j < cluster_size(c), "cluster ", c, " member ", j);
  const uint64_t r = members_[offsets_[c] + j];
  if (r >= records_) fail("corrupt cluster index ", map_->path(), ": cluster ", c, " names record ", r, " of ", records_);
  return r;
}

}  // namespace biofm
