// Speculative decoding primitives: n-gram proposals, greedy verification against step-by-step
// greedy, and chi-square tests that speculative sampling emits the target's processed
// distribution (and that the same statistic catches broken acceptance rules).
#include "decode/speculative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "decode/chi_square.h"

namespace shrike::decode {
namespace {

using testing::chi_square;
using testing::ChiSquare;

// ---- n-gram proposer ----

std::vector<int32_t> proposal(std::vector<int32_t> seq, int32_t k, int32_t lo = 1, int32_t hi = 3) {
  NgramProposer p(lo, hi);
  p.append(seq);
  return p.propose(k);
}

TEST(NgramProposer, ContinuesTheEarlierOccurrenceOfTheLongestSuffix) {
  EXPECT_EQ(proposal({1, 2, 3, 4, 1, 2, 3}, 2), (std::vector<int32_t>{4, 1}));
  // [5, 1] matched (n = 2) beats the more recent [1] (n = 1) ...
  EXPECT_EQ(proposal({5, 1, 9, 3, 1, 8, 5, 1}, 3), (std::vector<int32_t>{9, 3, 1}));
  // ... which is what unigrams alone find.
  EXPECT_EQ(proposal({5, 1, 9, 3, 1, 8, 5, 1}, 3, 1, 1), (std::vector<int32_t>{8, 5, 1}));
  // min_ngram 2: a lone repeated token is not enough.
  EXPECT_TRUE(proposal({7, 1, 8, 1}, 3, 2, 3).empty());
}

TEST(NgramProposer, TakesTheMostRecentOccurrence) {
  EXPECT_EQ(proposal({1, 2, 5, 1, 2, 6, 1, 2}, 3), (std::vector<int32_t>{6, 1, 2}));
}

TEST(NgramProposer, StopsAtTheEndAndProposesNothingWithoutAMatch) {
  EXPECT_EQ(proposal({4, 4}, 5), (std::vector<int32_t>{4}));
  EXPECT_TRUE(proposal({1, 2, 3}, 4).empty());
  EXPECT_TRUE(proposal({}, 4).empty());
  EXPECT_TRUE(proposal({1, 2, 1}, 0).empty());
  EXPECT_THROW(NgramProposer(0, 3), std::invalid_argument);
  EXPECT_THROW(NgramProposer(3, 2), std::invalid_argument);
  EXPECT_THROW(NgramProposer(1, NgramProposer::kMaxNgram + 1), std::invalid_argument);
}

// O(L^2) reference: the latest start j < L - n with seq[j, j + n) == the last n tokens.
std::vector<int32_t> brute_force(const std::vector<int32_t>& seq, int32_t k, int32_t lo,
                                 int32_t hi) {
  const int64_t size = int64_t(seq.size());
  for (int32_t n = std::min<int64_t>(hi, size); n >= lo; --n)
    for (int64_t j = size - n - 1; j >= 0; --j)
      if (std::equal(seq.begin() + j, seq.begin() + j + n, seq.end() - n)) {
        const int64_t stop = std::min(size, j + n + k);
        return {seq.begin() + j + n, seq.begin() + stop};
      }
  return {};
}

TEST(NgramProposer, IncrementalIndexMatchesABruteForceScan) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t vocab = 2 + int32_t(rng() % 6), lo = 1 + int32_t(rng() % 2),
                  hi = lo + int32_t(rng() % 3);
    NgramProposer p(lo, hi);
    std::vector<int32_t> seq;
    for (int chunk = 0; chunk < 30; ++chunk) {
      // Appends of 1..5 tokens at a time, as a prompt then accepted tokens arrive.
      std::vector<int32_t> add(1 + rng() % 5);
      for (auto& t : add) t = int32_t(rng() % uint64_t(vocab));
      p.append(add);
      seq.insert(seq.end(), add.begin(), add.end());
      const int32_t k = 1 + int32_t(rng() % 6);
      ASSERT_EQ(p.propose(k), brute_force(seq, k, lo, hi)) << trial << " " << chunk;
    }
    p.clear();
    EXPECT_TRUE(p.propose(3).empty());
  }
}

// ---- greedy verification ----

TEST(VerifyGreedy, AcceptsTheMatchingPrefixThenTheTargetsToken) {
  const std::vector<int32_t> draft{5, 6, 7};
  Verification v = verify_greedy(draft, std::vector<int32_t>{5, 6, 9, 1});
  EXPECT_EQ(v.accepted, 2);
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{5, 6, 9}));
  v = verify_greedy(draft, std::vector<int32_t>{5, 6, 7, 1});
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{5, 6, 7, 1}));
  v = verify_greedy({}, std::vector<int32_t>{4});
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{4}));
  EXPECT_THROW(verify_greedy(draft, std::vector<int32_t>{5, 6, 7}), std::invalid_argument);
}

// Logits on a coarse grid, so that ties are common and the first-index rule is exercised.
std::vector<float> tie_prone_logits(int64_t rows, int64_t vocab, std::mt19937_64& rng) {
  std::vector<float> x(size_t(rows * vocab));
  for (auto& v : x) v = float(rng() % 4);
  return x;
}

TEST(VerifyGreedy, EqualsStepByStepGreedyOnRandomLogits) {
  std::mt19937_64 rng(11);
  constexpr int64_t kVocab = 12;
  for (int trial = 0; trial < 5000; ++trial) {
    SamplerParams sp;  // greedy; half the trials with penalties, which make rows prefix-dependent
    if (trial % 2) {
      sp.presence_penalty = 0.7f;
      sp.repetition_penalty = 1.3f;
    }
    const int32_t k = int32_t(rng() % 6);
    auto logits = tie_prone_logits(k + 1, kVocab, rng);
    const std::vector<int32_t> prompt{int32_t(rng() % kVocab), int32_t(rng() % kVocab)};
    const std::vector<int32_t> output{int32_t(rng() % kVocab)};

    // Reference: one token at a time with the sampler, each row after the tokens emitted so far.
    Sampler ref(sp);
    std::vector<int32_t> greedy_tokens, seen = output;
    for (int32_t i = 0; i <= k; ++i) {
      greedy_tokens.push_back(ref.sample(&logits[size_t(i * kVocab)], kVocab, prompt, seen).token);
      seen.push_back(greedy_tokens.back());
    }
    // Drafts: the greedy tokens with random corruptions, so every accepted length occurs.
    std::vector<int32_t> draft(greedy_tokens.begin(), greedy_tokens.begin() + k);
    for (auto& t : draft)
      if (rng() % 3 == 0) t = int32_t(rng() % kVocab);
    int32_t expected_accepted = 0;
    while (expected_accepted < k &&
           draft[size_t(expected_accepted)] == greedy_tokens[size_t(expected_accepted)])
      ++expected_accepted;
    // Rows after a rejected draft were computed with that draft in the context: their greedy
    // tokens are not the reference's, and verification must not look at them.
    const std::vector<float> before = logits;
    Sampler s(sp);
    const Verification v = verify(s, draft, nullptr, logits.data(), kVocab, prompt, output);
    ASSERT_EQ(v.accepted, expected_accepted) << trial;
    ASSERT_EQ(v.tokens, std::vector<int32_t>(greedy_tokens.begin(),
                                             greedy_tokens.begin() + expected_accepted + 1))
        << trial;
    ASSERT_EQ(logits, before) << "logits restored";
    if (sp.presence_penalty == 0) {  // without penalties, verify_greedy on raw argmaxes agrees
      std::vector<int32_t> target;
      for (int32_t i = 0; i <= k; ++i)
        target.push_back(argmax(&logits[size_t(i * kVocab)], kVocab));
      ASSERT_EQ(verify_greedy(draft, target).tokens, v.tokens) << trial;
    }
  }
}

TEST(Verify, RefusesDraftTokensOutsideTheVocabulary) {
  Sampler s({});
  std::vector<float> logits(2 * 4, 0.0f);
  EXPECT_THROW(verify(s, std::vector<int32_t>{4}, nullptr, logits.data(), 4, {}, {}),
               std::invalid_argument);
  EXPECT_THROW(verify(s, std::vector<int32_t>{-1}, nullptr, logits.data(), 4, {}, {}),
               std::invalid_argument);
}

// ---- speculative sampling: chi-square against the processed target distribution ----

constexpr int64_t kV = 10;
constexpr int kSamples = 100000;
constexpr double kAlpha = 0.01;

// A bigram "model": the logits of the next token depend on the previous token only, so the
// target row after any prefix is known and the exact joint distribution can be computed.
struct Bigram {
  std::vector<float> table;  // [prev][next]
  const float* row(int32_t prev) const { return &table[size_t(prev * kV)]; }
};

Bigram random_bigram(uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  Bigram b;
  b.table.resize(size_t(kV * kV));
  for (auto& x : b.table) x = n(rng);
  return b;
}

// Every transform of the sampler at once, penalties included (so the target's distribution at
// step 2 depends on the token emitted at step 1).
SamplerParams target_params() {
  SamplerParams p;
  p.temperature = 0.9f;
  p.top_k = 8;
  p.top_p = 0.97f;
  p.min_p = 0.02f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.2f;
  p.repetition_penalty = 1.2f;
  p.seed = 20231;
  return p;
}

const std::vector<int32_t> kPrompt{3, 4};
const std::vector<int32_t> kOutput{1};

// The processed distribution after prompt / output, dense.
std::vector<double> processed(Sampler& s, const Bigram& m, std::span<const int32_t> output) {
  std::vector<float> row(m.row(output.back()), m.row(output.back()) + kV);
  std::vector<TokenProb> p;
  s.probabilities(row.data(), kV, kPrompt, output, &p);
  std::vector<double> dense(kV, 0.0);
  for (const auto& tp : p) dense[size_t(tp.token)] += tp.prob;
  return dense;
}

// A draft that proposes k tokens with q rows (dense): a draft bigram model, drawn by its own
// generator; or a fixed sequence (q == nullptr, a point mass as the n-gram proposer's).
struct Draft {
  enum Kind { kModel, kFixed } kind = kModel;
  Bigram model;
  std::vector<int32_t> fixed;
  // q of a model draft: the draft bigram's softmax at temperature 1 (its own processing), or,
  // when `bad`, 0.9 on the target's least likely token and the rest spread evenly.
  bool bad = false;
  const Bigram* target = nullptr;

  std::vector<float> q_row(int32_t prev) const {
    std::vector<float> q(kV);
    if (bad) {
      const float* t = target->row(prev);
      const int64_t worst = std::min_element(t, t + kV) - t;
      for (int64_t i = 0; i < kV; ++i) q[size_t(i)] = i == worst ? 0.9f : 0.1f / float(kV - 1);
      return q;
    }
    const float* x = model.row(prev);
    const float max = *std::max_element(x, x + kV);
    float sum = 0;
    for (int64_t i = 0; i < kV; ++i) sum += q[size_t(i)] = std::exp(x[i] - max);
    for (auto& v : q) v /= sum;
    return q;
  }
};

// One speculative step: k drafts after `prev`, the target's k + 1 rows, and `verify`-like
// verification by `verifier`.
template <typename Verifier>
Verification spec_step(Sampler& s, const Bigram& target, const Draft& d, int32_t k,
                       std::span<const int32_t> output, std::mt19937_64& draft_rng,
                       Verifier&& verifier) {
  std::vector<int32_t> draft;
  std::vector<float> q;
  int32_t prev = output.back();
  for (int32_t i = 0; i < k; ++i) {
    if (d.kind == Draft::kFixed) {
      draft.push_back(d.fixed[size_t(i)]);
    } else {
      const auto row = d.q_row(prev);
      q.insert(q.end(), row.begin(), row.end());
      std::discrete_distribution<int32_t> pick(row.begin(), row.end());
      draft.push_back(pick(draft_rng));
    }
    prev = draft.back();
  }
  std::vector<float> rows;
  prev = output.back();
  for (int32_t i = 0; i <= k; ++i) {
    rows.insert(rows.end(), target.row(prev), target.row(prev) + kV);
    if (i < k) prev = draft[size_t(i)];
  }
  return verifier(s, draft, d.kind == Draft::kFixed ? nullptr : q.data(), rows.data(), output);
}

const auto kVerify = [](Sampler& s, std::span<const int32_t> draft, const float* q, float* rows,
                        std::span<const int32_t> output) {
  return verify(s, draft, q, rows, kV, kPrompt, output);
};

// Deliberately wrong rules, to show the tests can fail. Always accepting emits the draft's
// distribution; resampling from p (not the residual) on rejection over-weights what the draft
// proposes.
const auto kAlwaysAccept = [](Sampler& s, std::span<const int32_t> draft, const float*, float* rows,
                              std::span<const int32_t> output) {
  Verification v;
  v.tokens.assign(draft.begin(), draft.end());
  v.accepted = int32_t(draft.size());
  std::vector<int32_t> seen(output.begin(), output.end());
  seen.insert(seen.end(), draft.begin(), draft.end());
  v.tokens.push_back(s.sample(rows + int64_t(draft.size()) * kV, kV, kPrompt, seen).token);
  return v;
};
const auto kResampleFromP = [](Sampler& s, std::span<const int32_t> draft, const float* q,
                               float* rows, std::span<const int32_t> output) {
  Verification v;
  std::vector<int32_t> seen(output.begin(), output.end());
  std::vector<TokenProb> p;
  for (size_t i = 0; i < draft.size(); ++i) {
    s.probabilities(rows + int64_t(i) * kV, kV, kPrompt, seen, &p);
    double px = 0;
    for (const auto& tp : p)
      if (tp.token == draft[i]) px = tp.prob;
    const double qx = q ? double(q[int64_t(i) * kV + draft[i]]) : 1.0;
    if (std::uniform_real_distribution<double>(0, 1)(s.generator()) * qx < px) {
      v.tokens.push_back(draft[i]);
      ++v.accepted;
      seen.push_back(draft[i]);
      continue;
    }
    v.tokens.push_back(s.sample(rows + int64_t(i) * kV, kV, kPrompt, seen).token);  // wrong
    return v;
  }
  v.tokens.push_back(s.sample(rows + int64_t(draft.size()) * kV, kV, kPrompt, seen).token);
  return v;
};

// kSamples runs from the same start; the joint distribution of the first two emitted tokens
// (more steps when a step emits only one) against the exact p(a) p(b | a).
template <typename Verifier>
ChiSquare first_two_tokens(const Bigram& target, const Draft& d, int32_t k, Verifier&& verifier) {
  SamplerParams tp = target_params();
  tp.seed += 1;
  Sampler s(tp);
  std::mt19937_64 draft_rng(100);
  std::vector<int64_t> counts(size_t(kV * kV), 0);
  for (int n = 0; n < kSamples; ++n) {
    std::vector<int32_t> out = kOutput;
    while (out.size() < kOutput.size() + 2) {
      const Verification v = spec_step(s, target, d, k, out, draft_rng, verifier);
      out.insert(out.end(), v.tokens.begin(), v.tokens.end());
    }
    ++counts[size_t(out[1] * kV + out[2])];
  }
  Sampler exact(target_params());
  const auto p1 = processed(exact, target, kOutput);
  std::vector<double> joint(size_t(kV * kV), 0.0);
  for (int32_t a = 0; a < kV; ++a) {
    if (p1[size_t(a)] == 0) continue;
    const std::vector<int32_t> after_a{kOutput[0], a};
    const auto p2 = processed(exact, target, after_a);
    for (int32_t b = 0; b < kV; ++b) joint[size_t(a * kV + b)] = p1[size_t(a)] * p2[size_t(b)];
  }
  return chi_square(counts, joint);
}

// The first emitted token alone against the processed p: kSamples single steps.
template <typename Verifier>
ChiSquare first_token(const Bigram& target, const Draft& d, int32_t k, Verifier&& verifier) {
  Sampler s(target_params());
  std::mt19937_64 draft_rng(98);
  std::vector<int64_t> counts(kV, 0);
  for (int n = 0; n < kSamples; ++n)
    ++counts[size_t(spec_step(s, target, d, k, kOutput, draft_rng, verifier).tokens[0])];
  Sampler exact(target_params());
  return chi_square(counts, processed(exact, target, kOutput));
}

void expect_matches(const ChiSquare& r, const char* what) {
  EXPECT_EQ(r.impossible, 0) << what;
  EXPECT_GT(r.p_value, kAlpha) << what << ": chi2 " << r.statistic << " df " << r.df;
  std::printf("%-40s chi2 %8.2f  df %3lld  p %.4f\n", what, r.statistic, (long long)r.df,
              r.p_value);
}

void expect_detected(const ChiSquare& r, const char* what) {
  EXPECT_TRUE(r.impossible > 0 || r.p_value < 1e-6)
      << what << ": chi2 " << r.statistic << " df " << r.df << " p " << r.p_value;
  std::printf("%-40s chi2 %8.2f  df %3lld  p %.3g  impossible %lld\n", what, r.statistic,
              (long long)r.df, r.p_value, (long long)r.impossible);
}

struct Fixture {
  Bigram target = random_bigram(1, 1.5f);
  Draft good, bad, fixed;
  Fixture() {
    good.model = target;  // the target's logits plus noise: a plausible draft model
    std::mt19937_64 rng(2);
    std::normal_distribution<float> noise(0.0f, 0.7f);
    for (auto& x : good.model.table) x += noise(rng);
    bad.bad = true;
    bad.target = &target;
    // The n-gram draft starts with the target's most likely token, so that accepting and
    // rejecting it both happen often.
    Sampler exact(target_params());
    const auto p = processed(exact, target, kOutput);
    fixed.kind = Draft::kFixed;
    fixed.fixed = {int32_t(std::max_element(p.begin(), p.end()) - p.begin()), 5, 2, 7};
  }
};

TEST(SpeculativeSampling, DirectSamplingMatchesTheProcessedProbabilities) {
  // The reference the other tests compare with: sample() draws from probabilities().
  const Fixture f;
  Sampler s(target_params());
  std::vector<int64_t> counts(kV, 0);
  for (int n = 0; n < kSamples; ++n) {
    std::vector<float> row(f.target.row(kOutput.back()), f.target.row(kOutput.back()) + kV);
    ++counts[size_t(s.sample(row.data(), kV, kPrompt, kOutput).token)];
  }
  Sampler exact(target_params());
  const auto p = processed(exact, f.target, kOutput);
  EXPECT_GT(std::count(p.begin(), p.end(), 0.0), 0) << "the transforms cut some tokens";
  expect_matches(chi_square(counts, p), "direct sampling");
}

TEST(SpeculativeSampling, FirstTokenMatchesTheTarget) {
  const Fixture f;
  expect_matches(first_token(f.target, f.good, 3, kVerify), "first token, good draft");
  expect_matches(first_token(f.target, f.bad, 3, kVerify), "first token, bad draft");
  expect_matches(first_token(f.target, f.fixed, 3, kVerify), "first token, n-gram (point mass)");
}

TEST(SpeculativeSampling, FirstTwoTokensMatchTheTarget) {
  const Fixture f;
  expect_matches(first_two_tokens(f.target, f.good, 3, kVerify), "two tokens, good draft");
  expect_matches(first_two_tokens(f.target, f.bad, 2, kVerify), "two tokens, bad draft");
  expect_matches(first_two_tokens(f.target, f.fixed, 4, kVerify), "two tokens, n-gram");
}

TEST(SpeculativeSampling, BrokenAcceptanceRulesAreDetected) {
  const Fixture f;
  expect_detected(first_token(f.target, f.good, 3, kAlwaysAccept), "always accept, good draft");
  expect_detected(first_two_tokens(f.target, f.fixed, 4, kAlwaysAccept), "always accept, n-gram");
  expect_detected(first_token(f.target, f.bad, 3, kResampleFromP), "resample from p, bad draft");
  expect_detected(first_token(f.target, f.fixed, 3, kResampleFromP), "resample from p, n-gram");
}

TEST(SpeculativeSampling, GoodDraftsAreAcceptedMoreOften) {
  const Fixture f;
  Sampler s(target_params());
  std::mt19937_64 draft_rng(5);
  SpeculativeStats good, bad;
  for (int n = 0; n < 2000; ++n) {
    good.add(3, spec_step(s, f.target, f.good, 3, kOutput, draft_rng, kVerify).accepted);
    bad.add(3, spec_step(s, f.target, f.bad, 3, kOutput, draft_rng, kVerify).accepted);
  }
  EXPECT_GT(good.acceptance_rate(), 0.4);
  EXPECT_LT(bad.acceptance_rate(), 0.2);
  EXPECT_GT(good.mean_accepted_per_step(), bad.mean_accepted_per_step());
}

// ---- adaptive draft length, batch rule, statistics ----

TEST(AdaptiveDraftLength, ShrinksOnRejectionAndGrowsOnAcceptance) {
  AdaptiveDraftLength a({.min_k = 1, .max_k = 6, .initial_k = 4});
  EXPECT_EQ(a.k(), 4);
  a.update(0, 0);  // nothing proposed: no evidence
  EXPECT_EQ(a.k(), 4);
  for (int i = 0; i < 20; ++i) a.update(a.k(), 0);
  EXPECT_EQ(a.k(), 1);
  EXPECT_LT(a.acceptance_rate(), 0.01);
  int steps_to_grow = 0;
  while (a.k() == 1 && steps_to_grow < 100) {
    a.update(1, 1);
    ++steps_to_grow;
  }
  EXPECT_GT(steps_to_grow, 1) << "one good step after many bad ones is not enough";
  for (int i = 0; i < 20; ++i) a.update(a.k(), a.k());
  EXPECT_EQ(a.k(), 6);
  // Middling acceptance holds k.
  AdaptiveDraftLength m({.min_k = 1, .max_k = 8, .initial_k = 4, .lower = 0.3, .raise = 0.8});
  for (int i = 0; i < 50; ++i) m.update(4, 2);
  EXPECT_EQ(m.k(), 4);
  EXPECT_THROW(AdaptiveDraftLength({.min_k = 0}), std::invalid_argument);
  EXPECT_THROW(AdaptiveDraftLength({.min_k = 2, .max_k = 8, .initial_k = 1}),
               std::invalid_argument);
  EXPECT_THROW(AdaptiveDraftLength({.weight = 0}), std::invalid_argument);
  EXPECT_THROW(AdaptiveDraftLength({.lower = 0.9, .raise = 0.5}), std::invalid_argument);
}

// The i-th draft pays while r^i > row_cost: none for rarely accepted proposals, several for
// reliable ones, fewer when rows cost more; estimates follow what happens.
TEST(DraftWorth, DraftsOnlyAsFarAsAcceptancePaysForTheRows) {
  DraftWorth fresh;
  EXPECT_DOUBLE_EQ(fresh.rate(), 0.5);
  EXPECT_EQ(fresh.worth(8, 0.1), 3);  // 0.5, 0.25, 0.125 > 0.1; 0.0625 is not
  EXPECT_EQ(fresh.worth(2, 0.1), 2);
  DraftWorth junk;
  for (int i = 0; i < 40; ++i) junk.update(4, 0);  // never accepted
  EXPECT_LT(junk.rate(), 0.1);
  EXPECT_EQ(junk.worth(8, 0.1), 0);
  DraftWorth good;
  for (int i = 0; i < 40; ++i) good.update(4, i % 4 == 0 ? 3 : 4);  // 15 of 16 accepted
  EXPECT_GT(good.rate(), 0.9);
  EXPECT_EQ(good.worth(8, 0.01), 8);
  EXPECT_LT(good.worth(16, 0.5), good.worth(16, 0.1));
  // It forgets: a run of rejections brings a good kind down.
  for (int i = 0; i < 100; ++i) good.update(4, 0);
  EXPECT_EQ(good.worth(8, 0.1), 0);
  good.update(0, 0);  // nothing proposed: no evidence
  EXPECT_THROW(DraftWorth(0.0), std::invalid_argument);
}

TEST(StepCost, MeasuresTheCostOfOneMoreTokenFromStepTimes) {
  StepCost c;
  EXPECT_DOUBLE_EQ(c.row_cost(0.25), 0.25);  // nothing seen yet
  for (int i = 0; i < 20; ++i) c.observe(1, 0.010);
  EXPECT_DOUBLE_EQ(c.row_cost(0.25), 0.25);  // one size only: no slope
  // time = 9 ms + 1 ms per token: one more row costs 1 / 10 of a one-token step.
  for (int i = 0; i < 50; ++i)
    for (int n : {1, 2, 3, 5}) c.observe(n, 0.009 + 0.001 * n);
  EXPECT_NEAR(c.row_cost(0.25), 0.1, 1e-6);
  c.observe(40, 10.0);  // a prefill chunk past max_tokens is not a verification step
  EXPECT_NEAR(c.row_cost(0.25), 0.1, 1e-6);
  // A compute-bound model: every token costs as much as the first.
  StepCost bound;
  for (int i = 0; i < 50; ++i)
    for (int n : {1, 2, 4}) bound.observe(n, 0.001 * n);
  EXPECT_NEAR(bound.row_cost(0.25), 0.95, 1e-6);  // clamped just below 1
}

TEST(Speculation, OnlyBelowTheBatchThreshold) {
  EXPECT_TRUE(should_speculate(1, 64));
  EXPECT_TRUE(should_speculate(63, 64));
  EXPECT_FALSE(should_speculate(64, 64));
  EXPECT_FALSE(should_speculate(512, 64));
  EXPECT_EQ(draft_token_budget(10, 64), 54);
  EXPECT_EQ(draft_token_budget(100, 64), 0);
}

TEST(SpeculativeStats, CountsAndMeans) {
  SpeculativeStats s;
  EXPECT_EQ(s.acceptance_rate(), 0);
  EXPECT_EQ(s.mean_accepted_per_step(), 0);
  s.add(4, 3);
  s.add(4, 0);
  s.add(2, 2);
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.proposed, 10);
  EXPECT_EQ(s.accepted, 5);
  EXPECT_DOUBLE_EQ(s.acceptance_rate(), 0.5);
  EXPECT_DOUBLE_EQ(s.mean_accepted_per_step(), 5.0 / 3);
  EXPECT_DOUBLE_EQ(s.tokens_per_step(), 8.0 / 3);
}

// The draft model's cost rule against worked figures: a cheap, well-accepted draft drafts the
// longest length; one that costs about a target step drafts nothing; rejection-prone drafts
// stay short; nothing beats plain decoding without acceptance.
TEST(BestDraftLength, DraftsAsFarAsItPays) {
  // 5 MB intent teacher with a dim-64 draft: a = 0.9, a draft pass 5% of a step, a row 7%.
  EXPECT_EQ(best_draft_length(0.9, 0.05, 0.07, 4), 4);
  // The demo's small teacher with its student: the draft costs 75% of a step, a row 50%.
  EXPECT_EQ(best_draft_length(0.85, 0.75, 0.5, 4), 0);
  EXPECT_EQ(best_draft_length(0.0, 0.01, 0.01, 8), 0);
  // E(k) / cost(k) by hand for a = 0.5, costs 0.15 + 0.1: k = 1: 1.5 / 1.25 = 1.2; k = 2:
  // 1.75 / 1.5 = 1.17; k = 3: 1.875 / 1.75 = 1.07.
  EXPECT_EQ(best_draft_length(0.5, 0.15, 0.1, 8, 1.0), 1);
  // A gain must beat the margin: 1.2 does not beat 1.3.
  EXPECT_EQ(best_draft_length(0.5, 0.15, 0.1, 8, 1.3), 0);
  // Cheaper drafts are drafted further.
  EXPECT_LE(best_draft_length(0.8, 0.2, 0.1, 16), best_draft_length(0.8, 0.05, 0.05, 16));
}

TEST(StepCost, FitsTheOneTokenStepAndTheRowCost) {
  StepCost c;
  EXPECT_EQ(c.one_token_seconds(), 0);  // nothing seen yet
  for (int i = 0; i < 20; ++i) c.observe(1, 12e-6);
  EXPECT_EQ(c.one_token_seconds(), 0);               // one size only: the line is not determined
  for (int i = 0; i < 20; ++i) c.observe(5, 20e-6);  // t = 10 us + 2 us per token
  EXPECT_NEAR(c.one_token_seconds(), 12e-6, 1e-9);
  EXPECT_NEAR(c.row_cost(0.5), 2.0 / 12, 1e-6);
}

}  // namespace
}  // namespace shrike::decode
