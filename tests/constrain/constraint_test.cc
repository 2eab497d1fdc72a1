#include "constrain/constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "constrain/cache.h"
#include "constrain/error.h"
#include "constrain/regex.h"
#include "constrain/spec.h"
#include "decode/sampler.h"

namespace shrike::constrain {
namespace {

// id:            0       1    2    3     4     5    6      7    8
const std::vector<std::string> kBytes{"", "a", "b", "ab", " a", "c", "abc", " ", "<0x61>"};

std::shared_ptr<const TokenVocab> tiny_vocab(bool strip) {
  auto bytes = kBytes;
  bytes[8] = "a";  // a byte token spelling what token 1 spells: kept usable when asked to be
  std::vector<uint8_t> usable{0, 1, 1, 1, 1, 1, 1, 1, 1};
  return std::make_shared<const TokenVocab>(bytes, usable, /*eos=*/0, strip);
}

std::set<int32_t> ids(const decode::TokenBitset& m) {
  std::set<int32_t> s;
  for (int32_t i = 0; i < m.size(); ++i)
    if (m.test(i)) s.insert(i);
  return s;
}

TEST(TokenMask, AllowsExactlyTheTokensThatStayAlive) {
  auto c = std::make_shared<const Constraint>(regex_automaton("ab?c"), tiny_vocab(false));
  ConstraintState st(c);
  EXPECT_EQ(ids(st.allowed_mask()), (std::set<int32_t>{1, 3, 6, 8}));  // a, ab, abc, "a"
  ASSERT_TRUE(st.advance(3));                                          // "ab"
  EXPECT_EQ(ids(st.allowed_mask()), (std::set<int32_t>{5}));           // c only: no EOS yet
  EXPECT_FALSE(st.accepting());
  EXPECT_FALSE(st.advance(0));  // EOS is refused before a match
  EXPECT_FALSE(st.advance(2));  // "b" again: not allowed
  ASSERT_TRUE(st.advance(5));
  EXPECT_TRUE(st.accepting());
  EXPECT_TRUE(st.is_complete());
  EXPECT_EQ(ids(st.allowed_mask()), (std::set<int32_t>{0}));  // EOS only
  EXPECT_TRUE(st.advance(0));
  EXPECT_FALSE(st.advance(0));  // nothing after EOS
}

TEST(TokenMask, FirstTokenLosesItsLeadingSpaceWhenTheDetokeniserDropsIt) {
  auto c = std::make_shared<const Constraint>(regex_automaton("a+"), tiny_vocab(true));
  ConstraintState st(c);
  // " a" reads as "a" at the start; " " alone adds nothing and is offered as a no-op (models
  // trained on SentencePiece-encoded answers emit that dummy-prefix space first).
  EXPECT_EQ(ids(st.allowed_mask()), (std::set<int32_t>{1, 4, 7, 8}));
  ASSERT_TRUE(st.advance(4));
  EXPECT_EQ(ids(st.allowed_mask()), (std::set<int32_t>{0, 1, 8}));  // later " a" is " a"
  EXPECT_FALSE(st.advance(4));
  ConstraintState spaced(c);
  ASSERT_TRUE(spaced.advance(7));  // the dropped space: same state, no longer at the start
  EXPECT_FALSE(spaced.accepting());
  EXPECT_EQ(ids(spaced.allowed_mask()), (std::set<int32_t>{1, 8}));  // spaces are real now
}

TEST(TokenMask, ControlAndEmptyTokensNeverAllowed) {
  auto c = std::make_shared<const Constraint>(regex_automaton(".*"), tiny_vocab(false));
  ConstraintState st(c);
  const auto allowed = ids(st.allowed_mask());
  EXPECT_EQ(allowed, (std::set<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));  // EOS: ".*" accepts ""
  auto no_eos = std::make_shared<const TokenVocab>(kBytes, std::vector<uint8_t>(9, 1), -1, false);
  auto c2 = std::make_shared<const Constraint>(regex_automaton(".*"), no_eos);
  ConstraintState st2(c2);
  EXPECT_FALSE(st2.allowed_mask().test(0));  // no bytes: never
}

TEST(TokenMask, CachedPerStateAndShared) {
  auto c = std::make_shared<const Constraint>(regex_automaton("(ab)*"), tiny_vocab(false));
  ConstraintState a(c), b(c);
  const auto* m1 = &a.allowed_mask();
  const auto* m2 = &b.allowed_mask();
  EXPECT_EQ(m1, m2);  // the same cached bitset
  a.advance(3);
  a.allowed_mask();
  const int64_t computed = c->masks_computed();
  b.advance(3);
  EXPECT_EQ(&b.allowed_mask(), &a.allowed_mask());
  EXPECT_EQ(c->masks_computed(), computed);  // b's state was a's: no new walk
}

TEST(JumpForward, ForcedTokensWhileOnlyOneIsAllowed) {
  // Vocabulary without "ab": after "a" only "b" or "bc"... make a forced chain.
  std::vector<std::string> bytes{"", "x", "y", "z", "xy"};
  auto v = std::make_shared<const TokenVocab>(bytes, std::vector<uint8_t>{0, 1, 1, 1, 1}, 0, false);
  auto c = std::make_shared<const Constraint>(choices_automaton({"zzyx", "zzyy"}), v);
  ConstraintState st(c);
  EXPECT_EQ(st.forced_tokens(), (std::vector<int32_t>{3, 3, 2}));  // z z y: then x or y
  EXPECT_EQ(st.forced_text(), "zzy");
  for (int32_t t : st.forced_tokens()) ASSERT_TRUE(st.advance(t));
  EXPECT_TRUE(st.forced_tokens().empty());
  ASSERT_TRUE(st.advance(1));
  EXPECT_TRUE(st.forced_tokens().empty());  // only EOS left: not a forced token
  EXPECT_TRUE(st.is_complete());
}

// Greedy longest match over `bytes` (id 0 skipped): a test vocabulary's "canonical" tokens.
TokenVocab::Encoder greedy_longest_match(const std::vector<std::string>& bytes) {
  return [bytes](std::string_view text) {
    std::vector<int32_t> out;
    while (!text.empty()) {
      int32_t best = -1;
      for (int32_t i = 1; i < int32_t(bytes.size()); ++i)
        if (text.starts_with(bytes[size_t(i)]) &&
            (best < 0 || bytes[size_t(i)].size() > bytes[size_t(best)].size()))
          best = i;
      if (best < 0) return std::vector<int32_t>{};
      out.push_back(best);
      text.remove_prefix(bytes[size_t(best)].size());
    }
    return out;
  };
}

// Forced text that several tokens could spell is taken in the encoder's tokens: a choice's
// remainder costs what the tokenizer says (3 tokens for " to a human", not up to 11 single
// characters a weak model might pick); a remainder that does not end the constraint keeps its
// last token for the model (" a" may be the start of " an"); encoder output that does not spell
// the text is not used.
TEST(JumpForward, ForcedTextTakesTheEncodersTokens) {
  //                             0   1       2     3     4     5      6         7       8
  std::vector<std::string> bytes{"", "talk", " to", " t", "o", " a", " human", " an", " agent",
                                 // 9  10   11   12   13   14   15   16   17   18  19
                                 " ", "t", "a", "l", "k", "h", "u", "m", "n", "g", "e"};
  std::vector<uint8_t> usable(bytes.size(), 1);
  usable[0] = 0;
  auto v = std::make_shared<TokenVocab>(bytes, usable, 0, false);
  v->set_encoder(greedy_longest_match(bytes));
  {
    auto c = std::make_shared<const Constraint>(choices_automaton({"talk to a human", "track"}), v);
    ConstraintState st(c);
    EXPECT_TRUE(st.forced_tokens().empty()) << "the first token is the model's";
    ASSERT_TRUE(st.advance(1));                                      // "talk"
    EXPECT_EQ(st.forced_tokens(), (std::vector<int32_t>{2, 5, 6}));  // " to", " a", " human"
    EXPECT_EQ(st.forced_tokens(2), (std::vector<int32_t>{2, 5}));
    for (int32_t t : st.forced_tokens()) ASSERT_TRUE(st.advance(t));
    EXPECT_TRUE(st.is_complete());
  }
  {
    auto c = std::make_shared<const Constraint>(
        choices_automaton({"talk to a human", "talk to an agent"}), v);
    ConstraintState st(c);
    ASSERT_TRUE(st.advance(1));
    // " to a" is forced; " a" may be the start of " an": only " to" is taken.
    EXPECT_EQ(st.forced_text(), " to a");
    EXPECT_EQ(st.forced_tokens(), (std::vector<int32_t>{2}));
  }
  {
    auto wrong = std::make_shared<TokenVocab>(bytes, usable, 0, false);
    wrong->set_encoder([](std::string_view) { return std::vector<int32_t>{3, 4}; });  // " t" "o"
    auto c =
        std::make_shared<const Constraint>(choices_automaton({"talk to a human", "track"}), wrong);
    ConstraintState st(c);
    ASSERT_TRUE(st.advance(1));
    EXPECT_TRUE(st.forced_tokens().empty()) << "tokens that do not spell the text are refused";
  }
}

// Forced text whose end a longer token spans is the model's to write: the encoder writes
// `":{"` as one token in a whole answer, so forcing `":` then `{` would hand the model a split it
// never saw (a near-character task tokenizer lost its first slot name to it).
TEST(JumpForward, ATokenSpanningPastTheForcedTextLeavesItToTheModel) {
  //                             0   1    2     3      4    5        6     7
  std::vector<std::string> bytes{"", "k", "ey", "\":", "{", "\":{\"", "\"", "}"};
  std::vector<uint8_t> usable(bytes.size(), 1);
  usable[0] = 0;
  auto v = std::make_shared<TokenVocab>(bytes, usable, 0, false);
  v->set_encoder(greedy_longest_match(bytes));
  // An infinite language (a key of one or more "ey"), as a JSON answer's: the forced text goes
  // through the encoder, not a finite choice's canonical tokens.
  auto c = std::make_shared<const Constraint>(regex_automaton(R"(k":\{("(ey)+"|)\})"), v);
  ConstraintState st(c);
  ASSERT_TRUE(st.advance(1));  // "k"
  EXPECT_EQ(st.forced_text(), "\":{");
  EXPECT_TRUE(st.forced_tokens().empty()) << "\":{\" runs past the forced text";
  ASSERT_TRUE(st.advance(5));                                // the model's "\":{\""
  EXPECT_EQ(st.forced_tokens(), (std::vector<int32_t>{2}));  // ey; then " or another ey
}

TEST(ConstraintCache, CompilesEachSpecOnceAndRemembersErrors) {
  ConstraintCache cache(tiny_vocab(false), /*capacity=*/2);
  ConstraintSpec choice{ConstraintSpec::Kind::Choice, {"ab", "c"}, {}, {}};
  ConstraintSpec other{ConstraintSpec::Kind::Choice, {"a", "bc"}, {}, {}};
  EXPECT_NE(ConstraintCache::key(choice), ConstraintCache::key(other));
  const auto a = cache.get(choice);
  EXPECT_EQ(cache.get(choice), a);  // the same compiled constraint, masks and all
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_NE(cache.get(other), a);
  ConstraintSpec bad{ConstraintSpec::Kind::Regex, {}, "(a)\\1", {}};
  EXPECT_THROW(cache.get(bad), ConstraintError);
  try {
    cache.get(bad);  // from the cache: the same message
    ADD_FAILURE();
  } catch (const ConstraintError& e) {
    EXPECT_NE(std::string(e.what()).find("backreferences"), std::string::npos);
  }
  EXPECT_EQ(cache.size(), 2u);      // capacity 2: the least recently used went
  EXPECT_NE(cache.get(choice), a);  // evicted, compiled again
}

TEST(SamplerMask, MaskedTokensAreNeverChosen) {
  std::vector<float> logits{5, 4, 3, 2, 1, 0};
  decode::TokenBitset allowed(6);
  allowed.set(2), allowed.set(4);
  decode::Sampler greedy({});
  auto l = logits;
  EXPECT_EQ(greedy.sample(l.data(), 6, &allowed), 2);
  EXPECT_TRUE(std::isinf(l[0]) && l[0] < 0);  // masked in place
  decode::SamplerParams p;
  p.temperature = 1.0f;
  p.seed = 3;
  p.logprobs = true;
  decode::Sampler s(p);
  int n4 = 0;
  for (int i = 0; i < 2000; ++i) {
    l = logits;
    const auto r = s.sample(l.data(), 6, {}, {}, &allowed);
    ASSERT_TRUE(r.token == 2 || r.token == 4);
    n4 += r.token == 4;
    EXPECT_LE(r.logprob, 0.0f);
  }
  // p(4) = e^1 / (e^3 + e^1) = 0.119
  EXPECT_NEAR(n4 / 2000.0, 0.119, 0.025);
}

TEST(SamplerMask, ApplyMaskHandlesPartialWords) {
  std::vector<float> l(130, 1.0f);
  decode::TokenBitset allowed(130);
  allowed.set(0), allowed.set(64), allowed.set(129);
  decode::apply_token_mask(l.data(), 130, allowed);
  for (int i = 0; i < 130; ++i) EXPECT_EQ(std::isinf(l[size_t(i)]), i != 0 && i != 64 && i != 129);
}

// masked_argmax reads only the allowed ids and answers what argmax gives after apply_token_mask
// (random rows with ties, sparse and dense masks, NaN logits, partial last words).
TEST(SamplerMask, MaskedArgmaxEqualsArgmaxAfterTheMask) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(0, 6);
  for (int64_t n : {1, 63, 64, 65, 130, 3699})
    for (int trial = 0; trial < 100; ++trial) {
      std::vector<float> l(static_cast<size_t>(n));
      for (float& v : l) v = float(level(rng));
      // A NaN past id 0 (argmax's NaN at 0 answers 0, a quirk the masked form need not share).
      if (trial % 3 == 1 && n > 1) l[1 + rng() % size_t(n - 1)] = std::nanf("");
      decode::TokenBitset allowed(n);
      const unsigned every = trial % 2 ? 2 : 50;  // dense or sparse
      for (int64_t i = 0; i < n; ++i)
        if (rng() % every == 0) allowed.set(i);
      if (allowed.count() == 0) allowed.set(n - 1);
      const int32_t got = decode::masked_argmax(l.data(), n, allowed);
      decode::apply_token_mask(l.data(), n, allowed);
      bool number = false;  // an allowed logit above -inf (otherwise: the lowest allowed id)
      for (int64_t i = 0; i < n; ++i) number |= allowed.test(i) && l[size_t(i)] == l[size_t(i)];
      if (number)
        ASSERT_EQ(got, decode::argmax(l.data(), n)) << "n=" << n << " trial=" << trial;
      else
        ASSERT_EQ(got, allowed.first()) << "n=" << n << " trial=" << trial;
    }
  std::vector<float> l(10, -std::numeric_limits<float>::infinity());
  decode::TokenBitset none(10), some(10);
  some.set(3), some.set(7);
  EXPECT_EQ(decode::masked_argmax(l.data(), 10, none), -1);
  EXPECT_EQ(decode::masked_argmax(l.data(), 10, some), 3);  // all -inf: the lowest allowed
}

}  // namespace
}  // namespace shrike::constrain
