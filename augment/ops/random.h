// Deterministic random numbers for augmentation.
//
// Contract:
//  - Rng is xoshiro256** seeded through splitmix64: cheap to create, 32 bytes of state, the
//    same sequence on every platform and standard library.
//  - sample_seed(seed, epoch, index) gives every (epoch, sample) its own stream, so the crops
//    of a sample do not depend on thread count, scheduling or which process loads it.
//  - uniform() is in [0, 1) with 53 random bits; randint(lo, hi) is uniform on [lo, hi]
//    inclusive, without modulo bias. Not thread-safe: one Rng per thread or sample.
#pragma once

#include <cstdint>

namespace xdino::augment {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t sample_seed(uint64_t seed, uint64_t epoch, uint64_t index) {
  uint64_t s = seed;
  uint64_t h = splitmix64(s) ^ epoch;
  h = splitmix64(h) ^ index;
  return splitmix64(h);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  int64_t randint(int64_t lo, int64_t hi) {  // inclusive, Lemire's nearly-divisionless method
    const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
    if (range == 0) return static_cast<int64_t>(next());  // full 64-bit range
    __uint128_t m = static_cast<__uint128_t>(next()) * range;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < range) {
      const uint64_t threshold = -range % range;
      while (low < threshold) {
        m = static_cast<__uint128_t>(next()) * range;
        low = static_cast<uint64_t>(m);
      }
    }
    return lo + static_cast<int64_t>(m >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace xdino::augment
