// Prepared-dataset shards (data/shard.h): the bytes are a shard file; opening checks the header
// against the file size and every record read checks its offsets, so any input is either read
// within bounds or rejected with a biofm::Error naming the shard.
#include "biofm/core/error.h"
#include "biofm/data/shard.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = biofm::fuzz::write_temp(data, size, ".shard");
  try {
    biofm::ShardView v(path);
    uint64_t total = 0;
    for (uint64_t r = 0; r < v.records(); ++r) {
      try {
        const auto ids = v.record(r);
        for (uint8_t id : ids) total += id;  // touches every byte it hands out
      } catch (const biofm::Error&) {
      }
    }
    if (total == uint64_t(-1)) std::abort();  // keeps the reads
  } catch (const biofm::Error&) {
  }
  return 0;
}
