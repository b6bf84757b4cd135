// splitmix64: tiny, fast, and the same stream on every platform (std distributions are not), so
// a seed reproduces a bootstrap interval anywhere. Shared by every bootstrap in kbv.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kbv::stats {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by multiply-shift; its bias (n / 2^64) is far below bootstrap noise.
  size_t below(size_t n) {
    return static_cast<size_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace kbv::stats
