// Cluster indexes of prepared splits (data/clusters.h): the bytes are an index file, checked
// against the record count its header claims (so the checks past the header run too). Opening
// validates header, size and offsets; every member read is bounds-checked; any input is read
// within bounds or rejected with a biofm::Error naming the file.
#include <cstring>

#include "biofm/core/error.h"
#include "biofm/data/clusters.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = biofm::fuzz::write_temp(data, size, ".clusters");
  uint64_t records = 0;
  if (size >= 24) std::memcpy(&records, data + 16, 8);
  for (uint64_t claim : {records, records - 1}) {  // the header's count, and one fewer
    try {
      biofm::ClusterIndex idx(path, claim);
      uint64_t total = 0;
      for (uint64_t c = 0; c < idx.clusters(); ++c)
        for (uint64_t j = 0; j < idx.cluster_size(c); ++j) {
          try {
            total += idx.member(c, j);
          } catch (const biofm::Error&) {
          }
        }
      if (total == uint64_t(-1)) std::abort();  // keeps the reads
    } catch (const biofm::Error&) {
    }
  }
  return 0;
}
