// Cluster index of a prepared split (`biofm prepare --cluster-column`): which records belong to
// each cluster, for ESM-2's sampling (each sample picks a UniRef50 cluster, then one of its
// UniRef90 members). File layout, little-endian:
//
//   "BIOFMCL1"  u64 clusters C  u64 members M  u64 offsets[C + 1]  u64 members[M]
//
// Cluster c's members are members[offsets[c] .. offsets[c + 1]), record indices of the split
// (the order PreparedCorpus numbers them), ascending. Clusters are ordered by the hash of their
// name, so the index does not depend on the order the input files were read in.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "biofm/io/stream_file.h"

namespace biofm {

// Writes the index of `keyed` = (cluster hash, record) pairs, in any order; returns the file's
// digest and the number of clusters.
std::pair<FileDigest, uint64_t> write_cluster_index(const std::string& path,
                                                    std::vector<std::pair<uint64_t, uint64_t>> keyed);

class ClusterIndex {
 public:
  // Maps `path` and checks it against `records` (the split's record count): header, size,
  // offsets ascending and ending at M == records. Errors name the file.
  ClusterIndex(const std::string& path, uint64_t records);
  uint64_t clusters() const { return clusters_; }
  uint64_t cluster_size(uint64_t c) const { return offsets_[c + 1] - offsets_[c]; }
  // The j-th member of cluster c (a record index, bounds-checked against the records).
  uint64_t member(uint64_t c, uint64_t j) const;
  const std::string& path() const { return map_->path(); }
  uint32_t crc32() const { return map_->crc32(); }

 private:
  std::unique_ptr<MappedFile> map_;
  uint64_t clusters_ = 0, records_ = 0;
  const uint64_t* offsets_ = nullptr;
  const uint64_t* members_ = nullptr;
};

}  // namespace biofm
