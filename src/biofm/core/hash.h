// Small non-cryptographic 64-bit hashes for identities and fingerprints (data splits, parameter
// layouts, a run's inputs): FNV-1a over bytes, continued from a previous value, and splitmix64's
// finaliser to spread FNV's weak low bits.
#pragma once
#include <cstdint>
#include <string_view>

namespace biofm {

constexpr uint64_t kFnv1aStart = 1469598103934665603ull;

// FNV-1a of `s`, continuing from `h` (kFnv1aStart for a fresh hash).
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aStart) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// splitmix64's finaliser: every output bit depends on every input bit.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace biofm
