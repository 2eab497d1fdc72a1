// The data generators' random numbers: splitmix64, tiny, fast, and the same sequence on every
// platform (std:: distributions are not), so a dataset is reproducible from its seed anywhere.
#pragma once

#include <cstdint>

namespace shrike::data {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0 (the modulo bias is below 2^-40 for the sizes used here).
  uint64_t below(uint64_t n) { return next() % n; }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return uniform() < p; }
  // One element of a vector or array, uniformly.
  template <typename C>
  const typename C::value_type& pick(const C& c) {
    return c[below(c.size())];
  }

 private:
  uint64_t state_;
};

}  // namespace shrike::data
