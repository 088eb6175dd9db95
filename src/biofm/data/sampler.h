// Sample order: a pure function of (seed, global sample cursor), computed per index, so that
// 10^9 samples cost no more memory than 10^4 and any position of the stream is found at once.
//
// cursor i (0, 1, 2, ... across epochs) → epoch = i / N, slot = i % N, sample =
// permute_index(slot, N, seed, epoch), or slot itself when shuffle is off. permute_index is a
// bijection on [0, N): a 4-round Feistel network over the smallest domain 4^h >= N whose round
// function is Philox keyed by (seed, epoch, round), with values that land at or beyond N walked
// on through the network until they fall inside (fewer than 4 rounds of walking on average).
// Nothing depends on call order, world size or workers.
#pragma once
#include <cstdint>
#include <vector>

namespace biofm {

// The sample at slot `i` of epoch `epoch` (i < n < 2^62).
uint64_t permute_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch);
// The whole permutation of an epoch (tests, small n).
std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch);

class SampleOrder {
 public:
  SampleOrder() = default;
  SampleOrder(uint64_t n, uint64_t seed, bool shuffle);
  uint64_t size() const { return n_; }
  uint64_t epoch_of(uint64_t cursor) const { return cursor / n_; }
  // Sample index at global cursor position `cursor`.
  uint64_t operator()(uint64_t cursor) const;

 private:
  uint64_t n_ = 0, seed_ = 0;
  bool shuffle_ = false;
};

}  // namespace biofm
