// Sample order: a pure function of (seed, global sample cursor).
//
// cursor i (0, 1, 2, ... across epochs) → epoch = i / N, slot = i % N,
// sample = perm_epoch(slot), where perm_epoch is a Fisher–Yates shuffle of 0..N-1 whose swap
// at step j (j = N-1 down to 1) takes rng_below(seed, Shuffle, epoch, j, j + 1), or the
// identity when shuffle is off. Nothing depends on call order, world size or workers.
#pragma once
#include <cstdint>
#include <vector>

namespace biofm {

// The permutation of epoch `epoch` (size n < 2^32).
std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch);

class SampleOrder {
 public:
  SampleOrder() = default;
  SampleOrder(uint64_t n, uint64_t seed, bool shuffle);
  uint64_t size() const { return n_; }
  uint64_t epoch_of(uint64_t cursor) const { return cursor / n_; }
  // Sample index at global cursor position `cursor`. Caches the current epoch's permutation.
  uint64_t operator()(uint64_t cursor);

 private:
  uint64_t n_ = 0, seed_ = 0;
  bool shuffle_ = false;
  uint64_t cached_epoch_ = ~uint64_t(0);
  std::vector<uint32_t> perm_;
};

}  // namespace biofm
