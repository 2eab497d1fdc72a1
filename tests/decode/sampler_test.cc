#include "decode/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace shrike::decode {
namespace {

using Tokens = std::vector<int32_t>;

// The first version's sampling path, verbatim (full sort of the vocabulary): the rewrite must
// draw the same tokens for the same seed.
class FirstVersionSampler {
 public:
  explicit FirstVersionSampler(SamplerParams p) : params_(p), rng_(p.seed) {}
  int32_t sample(const float* logits, int64_t n_vocab) {
    if (params_.temperature <= 0.0f || params_.top_k == 1) return argmax(logits, n_vocab);
    std::vector<std::pair<float, int32_t>> candidates;
    for (int64_t i = 0; i < n_vocab; ++i)
      candidates.emplace_back(logits[i] / params_.temperature, int32_t(i));
    auto by_logit = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t keep = candidates.size();
    if (params_.top_k > 0 && size_t(params_.top_k) < keep) {
      keep = size_t(params_.top_k);
      std::partial_sort(candidates.begin(), candidates.begin() + long(keep), candidates.end(),
                        by_logit);
      candidates.resize(keep);
    } else {
      std::sort(candidates.begin(), candidates.end(), by_logit);
    }
    const float max = candidates.front().first;
    double sum = 0;
    for (auto& c : candidates) {
      c.first = std::exp(c.first - max);
      sum += c.first;
    }
    if (params_.top_p < 1.0f) {
      double cumulative = 0;
      size_t n = 0;
      while (n < candidates.size()) {
        cumulative += candidates[n].first / sum;
        ++n;
        if (cumulative >= params_.top_p) break;
      }
      candidates.resize(n);
      sum = 0;
      for (const auto& c : candidates) sum += c.first;
    }
    std::uniform_real_distribution<double> uniform(0.0, sum);
    double r = uniform(rng_);
    for (const auto& c : candidates) {
      r -= c.first;
      if (r <= 0) return c.second;
    }
    return candidates.back().second;
  }

 private:
  SamplerParams params_;
  std::mt19937_64 rng_;
};

std::vector<float> random_logits(int64_t n, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(static_cast<size_t>(n));
  for (auto& x : logits) x = normal(rng);
  return logits;
}

SamplerParams greedy() {
  return SamplerParams{};
}

// Greedy choice after penalties for the given history.
int32_t greedy_with(SamplerParams p, std::vector<float> logits, const Tokens& prompt,
                    const Tokens& output) {
  Sampler s(p);
  return s.sample(logits.data(), int64_t(logits.size()), prompt, output).token;
}

// Frequencies of n draws with the span API and no history.
std::vector<double> frequencies(SamplerParams p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    auto copy = logits;
    ++counts[size_t(s.sample(copy.data(), int64_t(copy.size()), {}, {}).token)];
  }
  std::vector<double> f;
  for (int c : counts) f.push_back(double(c) / n);
  return f;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p;
  double sum = 0;
  for (float x : logits) sum += std::exp(x / temperature);
  for (float x : logits) p.push_back(std::exp(x / temperature) / sum);
  return p;
}

TEST(Sampler, GreedyTakesTheFirstOfTiedMaxima) {
  std::vector<float> logits{1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(argmax(logits.data(), 5), 1);
  Sampler s(greedy());
  EXPECT_EQ(s.sample(logits.data(), 5), 1);
  EXPECT_EQ(s.sample(logits.data(), 5, {}, {}).token, 1);
  SamplerParams top1;
  top1.temperature = 1.5f;
  top1.top_k = 1;  // greedy whatever the temperature
  Sampler k1(top1);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(k1.sample(logits.data(), 5, {}, {}).token, 1);
}

// The vectorised argmax against the one-index scan it replaced: the first of the largest, NaN
// passed over, at every length around the vector widths and with ties, -inf and NaN placed
// anywhere.
TEST(Sampler, ArgmaxIsTheFirstOfTheLargestLikeAScan) {
  auto scan = [](const float* x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (x[i] > x[best]) best = i;
    return int32_t(best);
  };
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 5);  // few distinct values: many ties
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n = 1; n <= 70; ++n)
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = float(level(rng)) - 2.5f;
      if (trial % 4 == 1) x[size_t(rng() % size_t(n))] = nan;
      if (trial % 4 == 2) x[0] = nan;
      if (trial % 4 == 3) std::fill(x.begin(), x.end(), -inf);
      if (trial % 8 == 5) x[size_t(rng() % size_t(n))] = inf;
      ASSERT_EQ(argmax(x.data(), n), scan(x.data(), n)) << "n=" << n << " trial=" << trial;
    }
  std::vector<float> big(4099, -1.0f);
  big[4098] = 2.0f;
  big[17] = 2.0f;
  EXPECT_EQ(argmax(big.data(), int64_t(big.size())), 17);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplerParams p = greedy();
  p.repetition_penalty = 2.0f;
  // Positive: 4 / 2 = 2 < 2.5; with 1.5, 4 / 1.5 = 2.67 > 2.5.
  EXPECT_EQ(greedy_with(p, {4.0f, 2.5f}, {0}, {}), 1);
  EXPECT_EQ(greedy_with(p, {4.0f, 2.5f}, {}, {0}), 1);  // output tokens count too
  p.repetition_penalty = 1.5f;
  EXPECT_EQ(greedy_with(p, {4.0f, 2.5f}, {0}, {}), 0);
  // Negative: -1 * 2 = -2 < -1.5; with 1.4, -1.4 > -1.5.
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(greedy_with(p, {-1.0f, -1.5f}, {0}, {}), 1);
  p.repetition_penalty = 1.4f;
  EXPECT_EQ(greedy_with(p, {-1.0f, -1.5f}, {0}, {}), 0);
  // A penalty below 1 rewards repeats.
  p.repetition_penalty = 0.5f;
  EXPECT_EQ(greedy_with(p, {1.5f, 2.5f}, {0}, {}), 0);
}

TEST(Sampler, RepetitionPenaltyAppliesOncePerDistinctToken) {
  SamplerParams p = greedy();
  p.repetition_penalty = 2.0f;
  // Once: 4 / 2 = 2 > 1.5. Twice or more would give 1 < 1.5.
  EXPECT_EQ(greedy_with(p, {4.0f, 1.5f}, {0, 0, 0}, {0, 0}), 0);
  // Tokens absent from the history are untouched: 1.9 stays above 4 / 2.
  EXPECT_EQ(greedy_with(p, {4.0f, 1.9f, 2.1f}, {0}, {}), 2);
}

TEST(Sampler, PresencePenaltyCountsOutputTokensOnce) {
  SamplerParams p = greedy();
  p.presence_penalty = 0.5f;
  EXPECT_EQ(greedy_with(p, {1.0f, 0.6f}, {}, {0}), 1);  // 0.5 < 0.6
  p.presence_penalty = 0.25f;
  EXPECT_EQ(greedy_with(p, {1.0f, 0.6f}, {}, {0, 0, 0}), 0);  // 0.75 > 0.6, not 0.25
  // The prompt does not count.
  p.presence_penalty = 2.0f;
  EXPECT_EQ(greedy_with(p, {1.0f, 0.6f}, {0, 0}, {}), 0);
  // A negative penalty encourages repeats.
  p.presence_penalty = -1.0f;
  EXPECT_EQ(greedy_with(p, {0.5f, 1.0f}, {}, {0}), 0);
}

TEST(Sampler, FrequencyPenaltyScalesWithTheCount) {
  SamplerParams p = greedy();
  p.frequency_penalty = 0.125f;
  EXPECT_EQ(greedy_with(p, {1.0f, 0.6f}, {}, {0, 0, 0}), 0);     // 1 - 0.375 = 0.625 > 0.6
  EXPECT_EQ(greedy_with(p, {1.0f, 0.6f}, {}, {0, 0, 0, 0}), 1);  // 1 - 0.5 = 0.5 < 0.6
  // Interleaved with other tokens, and each token by its own count.
  EXPECT_EQ(greedy_with(p, {1.0f, 0.95f}, {}, {0, 1, 0, 0}), 1);  // 0.625 < 0.825
  // Both additive penalties together: 1 - 0.125 * 2 - 0.25 = 0.5 < 0.6; prompt ignored.
  p.presence_penalty = 0.25f;
  EXPECT_EQ(greedy_with(p, {1.0f, 0.6f}, {1, 1, 1}, {0, 0}), 1);
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.0f;
  EXPECT_EQ(greedy_with(p, {1.0f, 0.6f}, {}, {0, 0, 0, 0, 0, 0}), 0);  // defaults: no penalty
}

TEST(Sampler, PenaltiesStackRepetitionFirst) {
  // Repetition 2 then frequency 0.5: 3 / 2 - 0.5 = 1 < 1.2; the other order gives 1.25 > 1.2.
  SamplerParams p = greedy();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  EXPECT_EQ(greedy_with(p, {3.0f, 1.2f}, {}, {0}), 1);
  // A token seen only in the prompt gets the repetition penalty alone: 3 / 2 = 1.5 > 1.2.
  p.presence_penalty = 1.0f;
  EXPECT_EQ(greedy_with(p, {3.0f, 1.2f}, {0, 0}, {}), 0);
}

TEST(Sampler, LogitsAreRestoredAndStateResetBetweenCalls) {
  SamplerParams p = greedy();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.5f;
  Sampler s(p);
  const std::vector<float> original{4.0f, 1.5f, -1.0f, 3.0f};
  auto logits = original;
  EXPECT_EQ(s.sample(logits.data(), 4, Tokens{2, 3}, Tokens{0, 0}).token, 1);
  EXPECT_EQ(logits, original);
  // No history now: nothing left over from the previous call.
  EXPECT_EQ(s.sample(logits.data(), 4, {}, {}).token, 0);
  EXPECT_EQ(logits, original);
}

TEST(Sampler, BadTokenIdsAndVocabulariesAreClearErrors) {
  SamplerParams p = greedy();
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> logits{4.0f, 2.5f};
  EXPECT_THROW(s.sample(logits.data(), 2, Tokens{0, 2}, {}), std::invalid_argument);
  EXPECT_THROW(s.sample(logits.data(), 2, {}, Tokens{-1}), std::invalid_argument);
  EXPECT_THROW(s.sample(logits.data(), 0, {}, {}), std::invalid_argument);
  EXPECT_THROW(s.sample(nullptr, 2), std::invalid_argument);
  EXPECT_THROW(s.sample(logits.data(), -3), std::invalid_argument);
  // The failed calls left nothing behind.
  EXPECT_EQ(logits, (std::vector<float>{4.0f, 2.5f}));
  EXPECT_EQ(s.sample(logits.data(), 2, {}, {}).token, 0);
  EXPECT_EQ(s.sample(logits.data(), 2, Tokens{0}, {}).token, 1);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheMostLikely) {
  // p = 0.5, 0.3, 0.2: min_p 0.5 keeps p >= 0.25 (tokens 0 and 1, renormalised 5/8 and 3/8).
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplerParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;
  p.seed = 7;
  auto f = frequencies(p, logits, 4000);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[0], 0.625, 0.04);
  EXPECT_NEAR(f[1], 0.375, 0.04);
  p.min_p = 0.65f;  // 0.3 / 0.5 = 0.6 < 0.65: only the most likely remains
  f = frequencies(p, logits, 500);
  EXPECT_EQ(f[0], 1.0);
  p.min_p = 0.3f;  // 0.2 / 0.5 = 0.4 >= 0.3: nothing dropped
  f = frequencies(p, logits, 4000);
  EXPECT_NEAR(f[2], 0.2, 0.03);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingIt) {
  const std::vector<float> logits{std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;  // 0.5 < 0.7 <= 0.5 + 0.3
  p.seed = 11;
  auto f = frequencies(p, logits, 4000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_NEAR(f[1], 0.625, 0.04);
  EXPECT_NEAR(f[2], 0.375, 0.04);
  p.top_p = 0.45f;
  f = frequencies(p, logits, 500);
  EXPECT_EQ(f[1], 1.0);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  const std::vector<float> logits{0.0f, 1.0f, 1.0f, 0.5f, -1.0f};
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.seed = 5;
  auto f = frequencies(p, logits, 2000);
  EXPECT_NEAR(f[1] + f[2], 1.0, 1e-12);
  EXPECT_NEAR(f[1], 0.5, 0.05);
}

TEST(Sampler, SameSeedSameTokens) {
  const auto logits = random_logits(1000, 2.0f, 1);
  SamplerParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.min_p = 0.01f;
  p.presence_penalty = 0.3f;
  p.repetition_penalty = 1.1f;
  p.seed = 42;
  auto run = [&](SamplerParams params) {
    Sampler s(params);
    Tokens prompt{1, 2, 3}, out;
    for (int i = 0; i < 200; ++i) {
      auto copy = logits;
      out.push_back(s.sample(copy.data(), int64_t(copy.size()), prompt, out).token);
    }
    return out;
  };
  const Tokens a = run(p);
  EXPECT_EQ(a, run(p));
  p.seed = 43;
  EXPECT_NE(a, run(p));
}

TEST(Sampler, FrequenciesMatchTheSoftmax) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f};
  constexpr int kDraws = 20000;
  for (float temperature : {1.0f, 2.0f}) {
    SamplerParams p;
    p.temperature = temperature;
    p.seed = 2024;
    const auto f = frequencies(p, logits, kDraws);
    const auto expected = softmax(logits, temperature);
    for (size_t i = 0; i < 3; ++i) {
      // Five standard deviations of a binomial proportion: fails only if the draw is biased.
      const double sigma = std::sqrt(expected[i] * (1 - expected[i]) / kDraws);
      EXPECT_NEAR(f[i], expected[i], 5 * sigma) << "token " << i << " at T=" << temperature;
    }
  }
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  const std::vector<float> logits{1.0f, 2.0f, 3.0f, 0.5f};
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x));
  auto expected = [&](int t) { return double(logits[size_t(t)]) - std::log(sum); };

  SamplerParams p = greedy();
  p.logprobs = true;
  Sampler s(p);
  auto copy = logits;
  auto r = s.sample(copy.data(), 4, {}, {});
  EXPECT_EQ(r.token, 2);
  EXPECT_NEAR(r.logprob, expected(2), 1e-6);
  EXPECT_TRUE(r.top.empty());

  // Penalties change the choice but not the reported (raw) log probabilities.
  p.repetition_penalty = 4.0f;
  p.temperature = 0.5f;
  p.top_k = 1;
  Sampler penalised(p);
  r = penalised.sample(copy.data(), 4, {}, Tokens{2});
  EXPECT_EQ(r.token, 1);  // 3 / 4 < 2
  EXPECT_NEAR(r.logprob, expected(1), 1e-6);

  // Large logits: the shift by the maximum keeps this finite.
  std::vector<float> big{1000.0f, 999.0f};
  Sampler plain(SamplerParams{.logprobs = true});
  r = plain.sample(big.data(), 2, {}, {});
  EXPECT_NEAR(r.logprob, -std::log1p(std::exp(-1.0)), 1e-6);
}

TEST(Sampler, TopLogprobsMostLikelyFirstLowerIdOnTies) {
  const std::vector<float> logits{0.5f, 2.0f, 2.0f, -1.0f, 3.0f, 2.0f};
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x));
  SamplerParams p = greedy();
  p.top_logprobs = 4;  // without logprobs: the alternatives are still filled
  Sampler s(p);
  auto copy = logits;
  auto r = s.sample(copy.data(), 6, {}, {});
  ASSERT_EQ(r.top.size(), 4u);
  const int32_t order[] = {4, 1, 2, 5};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.top[i].token, order[i]) << i;
    EXPECT_NEAR(r.top[i].logprob, double(logits[size_t(order[i])]) - std::log(sum), 1e-6);
  }
  EXPECT_EQ(r.logprob, 0.0f);  // not asked for

  // More alternatives than tokens: all of them.
  SamplerParams all = greedy();
  all.top_logprobs = 20;
  Sampler s2(all);
  r = s2.sample(copy.data(), 6, {}, {});
  ASSERT_EQ(r.top.size(), 6u);
  EXPECT_EQ(r.top.back().token, 3);

  // A large vocabulary: the same as a full sort.
  auto big = random_logits(50000, 3.0f, 9);
  Sampler s3(all);
  r = s3.sample(big.data(), int64_t(big.size()), {}, {});
  std::vector<int32_t> ids(big.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return big[size_t(a)] > big[size_t(b)]; });
  ASSERT_EQ(r.top.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(r.top[i].token, ids[i]) << i;
  for (size_t i = 1; i < 20; ++i) EXPECT_GE(r.top[i - 1].logprob, r.top[i].logprob);
}

TEST(Sampler, DefaultsDrawWhatTheFirstVersionDrew) {
  struct Case {
    float temperature;
    int32_t top_k;
    float top_p;
    float scale;  // small: a flat distribution, so a top-p prefix spans thousands of tokens
  };
  const Case cases[] = {{0.0f, 0, 1.0f, 3.0f},  {0.7f, 0, 1.0f, 3.0f},   {1.0f, 40, 0.9f, 3.0f},
                        {0.8f, 40, 1.0f, 1.0f}, {1.0f, 0, 0.95f, 0.1f},  {1.3f, 0, 0.5f, 0.01f},
                        {1.0f, 1, 1.0f, 1.0f},  {0.6f, 100, 0.3f, 2.0f}, {2.0f, 0, 0.999f, 4.0f}};
  for (const Case& c : cases) {
    SamplerParams p;
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.seed = 1234;
    FirstVersionSampler reference(p);
    Sampler plain(p), with_spans(p);
    const Tokens prompt{5, 6, 7};
    Tokens out;
    for (int step = 0; step < 40; ++step) {
      const auto logits = random_logits(32000, c.scale, uint64_t(step));
      auto a = logits, b = logits;
      const int32_t want = reference.sample(logits.data(), int64_t(logits.size()));
      ASSERT_EQ(plain.sample(a.data(), int64_t(a.size())), want)
          << "T=" << c.temperature << " k=" << c.top_k << " p=" << c.top_p << " step " << step;
      ASSERT_EQ(with_spans.sample(b.data(), int64_t(b.size()), prompt, out).token, want);
      out.push_back(want);
    }
  }
}

TEST(Sampler, DegenerateLogitsDoNotCrash) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.min_p = 0.1f;
  Sampler s(p);
  std::vector<float> masked{-inf, -inf, -inf};
  EXPECT_EQ(s.sample(masked.data(), 3, {}, {}).token, 0);
  std::vector<float> forced{0.0f, inf, 1.0f};
  EXPECT_EQ(s.sample(forced.data(), 3, {}, {}).token, 1);
  std::vector<float> one_left{nan, -inf, 2.0f, nan};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(one_left.data(), 4, {}, {}).token, 2);
  // Out-of-range parameters still pick a token.
  p.top_p = 0.0f;
  p.min_p = 5.0f;
  p.top_k = -3;
  Sampler odd(p);
  std::vector<float> logits{1.0f, 3.0f, 2.0f};
  EXPECT_EQ(odd.sample(logits.data(), 3, {}, {}).token, 1);
}

TEST(Sampler, ParamsErrorNamesTheBadField) {
  EXPECT_EQ(sampler_params_error(SamplerParams{}), "");
  auto error = [](auto edit) {
    SamplerParams p;
    edit(p);
    return sampler_params_error(p);
  };
  EXPECT_NE(error([](SamplerParams& p) { p.temperature = -1; }).find("temperature"),
            std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.temperature = std::nanf(""); }).find("temperature"),
            std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.top_k = -1; }).find("top_k"), std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.top_p = 0; }).find("top_p"), std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.min_p = 1.5f; }).find("min_p"), std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.presence_penalty = 3; }).find("presence"),
            std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.frequency_penalty = -2.5f; }).find("frequency"),
            std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.repetition_penalty = 0; }).find("repetition"),
            std::string::npos);
  EXPECT_NE(error([](SamplerParams& p) { p.top_logprobs = 21; }).find("top_logprobs"),
            std::string::npos);
  EXPECT_EQ(error([](SamplerParams& p) {
              p.temperature = 0.7f;
              p.top_p = 1.0f;
              p.min_p = 1.0f;
              p.top_logprobs = 20;
              p.presence_penalty = -2.0f;
            }),
            "");
}

}  // namespace
}  // namespace shrike::decode
