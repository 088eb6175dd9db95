#include "biofm/data/sampler.h"

#include <numeric>
#include <utility>

#include "biofm/core/error.h"
#include "biofm/core/rng.h"

namespace biofm {

std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  if (n >= (uint64_t(1) << 32)) fail("sample order: ", n, " samples is more than 2^32 - 1");
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  for (uint64_t j = n; j-- > 1;) {
    uint32_t k = rng_below(seed, RngStream::Shuffle, epoch, uint32_t(j), uint32_t(j + 1));
    std::swap(p[j], p[k]);
  }
  return p;
}

SampleOrder::SampleOrder(uint64_t n, uint64_t seed, bool shuffle) : n_(n), seed_(seed), shuffle_(shuffle) {
  if (n == 0) fail("sample order over an empty dataset");
  if (n >= (uint64_t(1) << 32)) fail("sample order: ", n, " samples is more than 2^32 - 1");
}

uint64_t SampleOrder::operator()(uint64_t cursor) {
  BIOFM_CHECK(n_ > 0, "SampleOrder used before construction");
  uint64_t epoch = cursor / n_, slot = cursor % n_;
  if (!shuffle_) return slot;
  if (epoch != cached_epoch_) {
    perm_ = epoch_permutation(n_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return perm_[slot];
}

}  // namespace biofm
