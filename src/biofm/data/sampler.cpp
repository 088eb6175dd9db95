#include "biofm/data/sampler.h"

#include "biofm/core/error.h"
#include "biofm/core/rng.h"

namespace biofm {

uint64_t permute_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch) {
  BIOFM_CHECK(i < n && n < (uint64_t(1) << 62), "permute_index out of range");
  int h = 1;  // half width in bits: the network permutes [0, 4^h)
  while ((uint64_t(1) << (2 * h)) < n) ++h;
  const uint64_t mask = (uint64_t(1) << h) - 1;
  uint64_t x = i;
  do {
    uint64_t l = x >> h, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const auto b = rng_block(seed, RngStream::Shuffle, (epoch << 2) | round, uint32_t(r));
      const uint64_t f = (uint64_t(b[0]) | uint64_t(b[1]) << 32) & mask;
      const uint64_t next = l ^ f;
      l = r;
      r = next;
    }
    x = (l << h) | r;
  } while (x >= n);  // cycle walking: x's cycle passes through i, so this ends inside [0, n)
  return x;
}

std::vector<uint32_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  if (n >= (uint64_t(1) << 32)) fail("epoch_permutation: ", n, " samples is more than 2^32 - 1");
  std::vector<uint32_t> p(n);
  for (uint64_t i = 0; i < n; ++i) p[i] = uint32_t(permute_index(i, n, seed, epoch));
  return p;
}

SampleOrder::SampleOrder(uint64_t n, uint64_t seed, bool shuffle) : n_(n), seed_(seed), shuffle_(shuffle) {
  if (n == 0) fail("sample order over an empty dataset");
  if (n >= (uint64_t(1) << 62)) fail("sample order: ", n, " samples is more than 2^62");
}

uint64_t SampleOrder::operator()(uint64_t cursor) const {
  BIOFM_CHECK(n_ > 0, "SampleOrder used before construction");
  const uint64_t epoch = cursor / n_, slot = cursor % n_;
  return shuffle_ ? permute_index(slot, n_, seed_, epoch) : slot;
}

}  // namespace biofm
