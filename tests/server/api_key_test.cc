// The API key compare: right answers, and a time that does not depend on where a guess first
// goes wrong (an early-exit compare answers a guess wrong in its first byte far sooner).
#include "server/api_key.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace shrike::server {
namespace {

TEST(ApiKey, MatchesOnlyTheWholeKey) {
  EXPECT_TRUE(api_key_matches("sk-secret", "sk-secret"));
  EXPECT_FALSE(api_key_matches("sk-secreT", "sk-secret"));   // last byte
  EXPECT_FALSE(api_key_matches("Sk-secret", "sk-secret"));   // first byte
  EXPECT_FALSE(api_key_matches("sk-secre", "sk-secret"));    // a prefix
  EXPECT_FALSE(api_key_matches("sk-secrets", "sk-secret"));  // longer
  EXPECT_FALSE(api_key_matches("", "sk-secret"));
  EXPECT_FALSE(api_key_matches(std::string("sk-secret\0", 10), "sk-secret"));
  EXPECT_TRUE(api_key_matches("", ""));
  EXPECT_FALSE(api_key_matches("x", ""));
}

// Median time of many compares of `guess` against `key`.
double median_ns(const std::string& guess, const std::string& key) {
  std::vector<double> t;
  bool sink = false;
  for (int rep = 0; rep < 31; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) sink ^= api_key_matches(guess, key);
    t.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
  }
  EXPECT_FALSE(sink);  // every guess is wrong (and the result is used)
  std::nth_element(t.begin(), t.begin() + 15, t.end());
  return t[15];
}

TEST(ApiKey, TimeDoesNotDependOnWhereTheGuessDiffers) {
  // A long key makes the difference an early exit would make (the whole key against one byte)
  // far larger than timer noise; the two guesses are measured interleaved, three times, and the
  // closest pair of medians is compared, so one burst of load on the machine cannot fail it.
  const std::string key(1 << 16, 'k');
  std::string wrong_first = key, wrong_last = key;
  wrong_first.front() = 'x';
  wrong_last.back() = 'x';
  double best_ratio = 1e9;
  for (int round = 0; round < 3; ++round) {
    const double first = median_ns(wrong_first, key), last = median_ns(wrong_last, key);
    best_ratio = std::min(best_ratio, std::max(first, last) / std::min(first, last));
  }
  // memcmp-like compares measure thousands of times apart here; this one within noise.
  EXPECT_LT(best_ratio, 2.0);
}

}  // namespace
}  // namespace shrike::server
