// Helpers shared by the inference tests (embedder, scoring).
#pragma once
#include <string>
#include <vector>

#include "biofm/data/pack.h"

namespace biofm::infer::test {

inline std::string fixture(const std::string& name) {
  return std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/" + name;
}

// One sequence's ids as a one-sequence batch (no labels).
inline Batch one_batch(const std::vector<int32_t>& ids) {
  BatchBuilder b;
  std::vector<int32_t> labels(ids.size(), kIgnoreLabel);
  b.add(ids.data(), labels.data(), int64_t(ids.size()));
  return b.build(BatchMode::Thd, 1, 1);
}

}  // namespace biofm::infer::test
