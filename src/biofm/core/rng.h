// Counter-based random numbers (Philox4x32-10, as in Salmon et al. 2011 and cuRAND).
//
// Every random decision is a pure function of (seed, stream, index, offset): a stream
// names the purpose (shuffling, masking, init...), index is e.g. the global sample number,
// offset the position inside it. Nothing depends on call order, thread count or world
// size, so any batch can be regenerated from the data cursor alone, on CPU or GPU.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

namespace biofm {

enum class RngStream : uint32_t {
  Shuffle = 1,
  Mask = 2,
  Init = 3,
  Sample = 4,  // generation
  Eval = 5,
  StreamBuffer = 6,  // shuffle buffer of a streamed dataset (data/stream.h)
  Cluster = 7,       // member of a cluster drawn per epoch (data/prepared.h)
};

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(M0) * ctr[0];
    uint64_t p1 = uint64_t(M1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1],
           uint32_t(p0)};
    key[0] += W0;
    key[1] += W1;
  }
  return ctr;
}

// Four independent 32-bit words for (seed, stream, index, offset).
inline std::array<uint32_t, 4> rng_block(uint64_t seed, RngStream stream, uint64_t index,
                                         uint32_t offset) {
  std::array<uint32_t, 2> key = {uint32_t(seed), uint32_t(seed >> 32) ^ (uint32_t(stream) * 0x85EBCA6Bu)};
  return philox4x32({uint32_t(index), uint32_t(index >> 32), offset, uint32_t(stream)}, key);
}

// Uniform in [0, 1) with 24 random bits.
inline float u32_to_unit(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

inline float rng_uniform(uint64_t seed, RngStream s, uint64_t index, uint32_t offset) {
  return u32_to_unit(rng_block(seed, s, index, offset)[0]);
}

// Standard normal (Box-Muller on two words of the block).
inline float rng_normal(uint64_t seed, RngStream s, uint64_t index, uint32_t offset) {
  auto b = rng_block(seed, s, index, offset);
  double u1 = (double(b[0]) + 1.0) / 4294967297.0;  // (0, 1]
  double u2 = double(b[1]) / 4294967296.0;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Uniform integer in [0, n) (n > 0), nearly unbiased for n far below 2^32.
inline uint32_t rng_below(uint64_t seed, RngStream s, uint64_t index, uint32_t offset, uint32_t n) {
  uint64_t x = rng_block(seed, s, index, offset)[2];
  return uint32_t((x * n) >> 32);
}

}  // namespace biofm
