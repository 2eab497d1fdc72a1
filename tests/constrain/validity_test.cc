// The acceptance test of constrained decoding: output sampled through the token masks from random
// logits, with a real 32k vocabulary, always matches its constraint according to validators that
// share no code with the compiler (nlohmann::json + a small schema checker, std::wregex, set
// membership).
//
// Sampling: each step draws i.i.d. random logits at temperature 1 for the allowed tokens, and
// the maximum of i.i.d. logits is uniform over the allowed tokens, so the acceptance run draws
// that uniform choice directly (fast enough for 30 x 1000 outputs in seconds). A smaller run
// goes through decode::Sampler with full-vocabulary logits of a seeded random-weight "model"
// (fixed per-token biases plus noise) and the mask, as the engine will.
#include <gtest/gtest.h>

#include <chrono>
#include <codecvt>
#include <cstdlib>
#include <functional>
#include <locale>
#include <random>
#include <regex>
#include <set>

#include "constrain/constraint.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "constrain/spec.h"
#include "constrain/validity_cases.h"
#include "decode/sampler.h"
#include "gguf/gguf.h"
#include "shared_data.h"
#include "tokenizer/tokenizer.h"

namespace shrike::constrain {
namespace {

using ojson = nlohmann::ordered_json;
constexpr const char* kVocabFile = "reference/tokenizers/ggml-vocab-llama-spm.gguf";

using namespace validity;  // the cases and validators (validity_cases.h)

// ---- generation through the masks ----

struct Output {
  std::string text;
  std::vector<int32_t> tokens;
  int sampled = 0;  // sampling steps (forced tokens not counted)
  bool ended = false;
};

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The k-th allowed token (k < count), scanning words.
int32_t nth_allowed(const decode::TokenBitset& m, uint64_t k) {
  const auto& w = m.words();
  for (size_t i = 0; i < w.size(); ++i) {
    const auto n = uint64_t(std::popcount(w[i]));
    if (k < n) {
      uint64_t bits = w[i];
      for (uint64_t j = 0; j < k; ++j) bits &= bits - 1;
      return int32_t(i * 64 + size_t(std::countr_zero(bits)));
    }
    k -= n;
  }
  return -1;
}

// The random draw at a position depends only on (seed, position), so jump-forward (which skips
// the draws of forced positions) must give the same output as sampling every position.
Output generate(const std::shared_ptr<const Constraint>& c, const tokenizer::Tokenizer& tok,
                uint64_t seed, bool jump_forward, int max_tokens) {
  ConstraintState st(c);
  Output o;
  while (int(o.tokens.size()) < max_tokens) {
    if (jump_forward)
      for (int32_t t : st.forced_tokens(size_t(max_tokens) - o.tokens.size())) {
        EXPECT_TRUE(st.advance(t));
        o.tokens.push_back(t);
      }
    if (st.is_complete() || int(o.tokens.size()) >= max_tokens) {
      o.ended = st.is_complete();
      break;
    }
    const auto& mask = st.allowed_mask();
    const int64_t n = mask.count();
    EXPECT_GT(n, 0) << "no token allowed: the constraint led into a corner";
    if (n == 0) break;
    const int32_t t = nth_allowed(mask, mix(seed * 1000003 + o.tokens.size()) % uint64_t(n));
    ++o.sampled;
    EXPECT_TRUE(st.advance(t));
    if (t == tok.eos()) {
      o.ended = true;
      break;
    }
    o.tokens.push_back(t);
  }
  o.text = tok.decode(o.tokens);
  return o;
}

class Validity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = testing::shared_dir();
    if (dir.empty() || !std::filesystem::exists(dir + "/" + kVocabFile)) return;
    tok_ = new tokenizer::Tokenizer(
        tokenizer::vocab_from_gguf(gguf::GgufFile::open(dir + "/" + kVocabFile)));
    vocab_ = new std::shared_ptr<const TokenVocab>(TokenVocab::from_tokenizer(*tok_));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete tok_;
    vocab_ = nullptr;
    tok_ = nullptr;
  }

  // Samples `n` outputs; every one must end (EOS or complete) and pass `valid`.
  template <class Valid>
  void run(const std::string& name, const Automaton& a, Valid valid, int n, int max_tokens = 512) {
    auto c = std::make_shared<const Constraint>(a, *vocab_);
    int ok = 0, ended = 0;
    int64_t tokens = 0;
    for (int i = 0; i < n; ++i) {
      const Output o = generate(c, *tok_, uint64_t(i) + 1, false, max_tokens);
      ended += o.ended;
      tokens += int64_t(o.tokens.size());
      std::string why;
      if (o.ended && valid(o.text, why)) {
        ++ok;
      } else if (n - ok < 4 + (n - i)) {
        ADD_FAILURE() << name << ": invalid output " << (o.ended ? "" : "(not ended) ")
                      << ::testing::PrintToString(o.text) << " " << why;
      }
    }
    std::printf("  %-44s valid %d/%d  ended %d  mean tokens %.1f\n", name.substr(0, 44).c_str(), ok,
                n, ended, double(tokens) / n);
    total_ok_ += ok;
    total_ += n;
    EXPECT_EQ(ok, n) << name;
  }

  static tokenizer::Tokenizer* tok_;
  static std::shared_ptr<const TokenVocab>* vocab_;
  static inline int total_ok_ = 0, total_ = 0;
};

tokenizer::Tokenizer* Validity::tok_ = nullptr;
std::shared_ptr<const TokenVocab>* Validity::vocab_ = nullptr;

#define REQUIRE_VOCAB() SHRIKE_REQUIRE_SHARED(kVocabFile)

TEST_F(Validity, JsonSchemas) {
  REQUIRE_VOCAB();
  const int n = validity::outputs_per_constraint();
  for (const std::string& text : schemas()) {
    const ojson schema = ojson::parse(text);
    run(
        text.substr(0, 60), json_schema_automaton(schema),
        [&](const std::string& out, std::string& why) {
          nlohmann::json v;
          try {
            v = nlohmann::json::parse(out);
          } catch (const nlohmann::json::exception& e) {
            why = e.what();
            return false;
          }
          return check(v, schema, schema, why);
        },
        n);
  }
}

TEST_F(Validity, Regexes) {
  REQUIRE_VOCAB();
  const int n = validity::outputs_per_constraint();
  for (const std::string& p : regexes())
    run(
        "regex " + p, regex_automaton(p),
        [&](const std::string& out, std::string&) { return regex_full_match(p, out); }, n);
}

TEST_F(Validity, Choices) {
  REQUIRE_VOCAB();
  const int n = validity::outputs_per_constraint();
  for (const auto& list : choice_lists()) {
    const std::set<std::string> set(list.begin(), list.end());
    run(
        "choice " + list[0] + " ...", choices_automaton(list),
        [&](const std::string& out, std::string&) { return set.count(out) > 0; }, n);
  }
}

TEST_F(Validity, JsonObject) {
  REQUIRE_VOCAB();
  // Any object: strings are unbounded, so random sampling rarely finishes one. Outputs that hit
  // the length limit must still be a prefix of valid JSON (the parser fails only at the end).
  auto c = std::make_shared<const Constraint>(json_object_automaton(), *vocab_);
  int complete = 0;
  for (int i = 0; i < 200; ++i) {
    const Output o = generate(c, *tok_, uint64_t(i) + 1, false, 48);
    try {
      const auto v = nlohmann::json::parse(o.text);
      EXPECT_TRUE(o.ended && v.is_object()) << o.text;
      ++complete;
    } catch (const nlohmann::json::parse_error& e) {
      EXPECT_FALSE(o.ended) << o.text;
      EXPECT_EQ(e.byte, o.text.size() + 1) << "not a valid prefix: " << o.text << " " << e.what();
    }
  }
  std::printf("  json_object: %d/200 complete within 48 tokens, the rest valid prefixes\n",
              complete);
}

// Byte-level BPE vocabularies (GPT-2's byte-to-unicode pieces, no dummy-prefix stripping): the
// same check on a few constraints with fewer samples.
TEST(ValidityOtherVocabularies, ByteLevelBpe) {
  for (const char* file : {"reference/tokenizers/ggml-vocab-gpt-2.gguf",
                           "reference/tokenizers/ggml-vocab-deepseek-llm.gguf"}) {
    SHRIKE_REQUIRE_SHARED(file);
    const tokenizer::Tokenizer tok(
        tokenizer::vocab_from_gguf(gguf::GgufFile::open(testing::shared_dir() + "/" + file)));
    const auto vocab = TokenVocab::from_tokenizer(tok);
    const ojson schema = ojson::parse(schemas()[0]);
    const std::string re = regexes()[9];  // non-ASCII classes
    const auto labels = choice_lists()[4];
    const std::set<std::string> label_set(labels.begin(), labels.end());
    struct Case {
      const char* name;
      Automaton a;
      std::function<bool(const std::string&)> valid;
    };
    std::vector<Case> cases;
    cases.push_back({"intent schema", json_schema_automaton(schema), [&](const std::string& out) {
                       std::string why;
                       try {
                         return check(nlohmann::json::parse(out), schema, schema, why);
                       } catch (const nlohmann::json::exception&) {
                         return false;
                       }
                     }});
    cases.push_back({"regex", regex_automaton(re),
                     [&](const std::string& out) { return regex_full_match(re, out); }});
    cases.push_back({"choices", choices_automaton(labels),
                     [&](const std::string& out) { return label_set.count(out) > 0; }});
    for (const Case& cs : cases) {
      auto c = std::make_shared<const Constraint>(cs.a, vocab);
      int ok = 0;
      for (int i = 0; i < 200; ++i) {
        const Output o = generate(c, tok, uint64_t(i) + 1, false, 512);
        const bool valid = o.ended && cs.valid(o.text);
        ok += valid;
        EXPECT_TRUE(valid) << file << " " << cs.name << ": " << o.text;
      }
      std::printf("  %s, %s: valid %d/200\n", file + 21, cs.name, ok);
    }
  }
}

// Through decode::Sampler: full-vocabulary logits of a random-weight "model", the mask applied
// by the sampler.
TEST_F(Validity, ThroughTheSampler) {
  REQUIRE_VOCAB();
  const int64_t nv = tok_->n_vocab();
  std::mt19937 init(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> bias(static_cast<size_t>(nv));
  for (float& b : bias) b = normal(init);
  const ojson schema = ojson::parse(schemas()[0]);
  const std::vector<std::string> labels = intent_labels();
  const std::vector<std::pair<std::string, Automaton>> cases{
      {"intent schema", json_schema_automaton(schema)},
      {"regex", regex_automaton(regexes()[1])},
      {"choices", choices_automaton(choice_lists()[2])}};
  for (const auto& [name, a] : cases) {
    auto c = std::make_shared<const Constraint>(a, *vocab_);
    int ok = 0;
    const int n = 30;
    for (int i = 0; i < n; ++i) {
      decode::SamplerParams p;
      p.temperature = 1.0f;
      p.seed = uint64_t(i);
      decode::Sampler sampler(p);
      ConstraintState st(c);
      std::vector<int32_t> out;
      std::vector<float> logits(static_cast<size_t>(nv));
      std::mt19937 noise{uint32_t(i)};
      while (out.size() < 256 && !st.is_complete()) {
        for (int64_t k = 0; k < nv; ++k) logits[size_t(k)] = bias[size_t(k)] + normal(noise);
        const int32_t t = sampler.sample(logits.data(), nv, &st.allowed_mask());
        ASSERT_TRUE(st.advance(t)) << "the sampler chose a masked token";
        if (t == tok_->eos()) break;
        out.push_back(t);
      }
      const std::string text = tok_->decode(out);
      std::string why;
      bool valid = st.accepting();
      if (name == "intent schema")
        valid = valid && check(nlohmann::json::parse(text), schema, schema, why);
      else if (name == "regex")
        valid = valid && regex_full_match(regexes()[1], text);
      else
        valid = valid && std::set<std::string>(labels.begin(), labels.end()).count(text);
      ok += valid;
      EXPECT_TRUE(valid) << name << ": " << text;
    }
    std::printf("  sampler path, %s: valid %d/%d\n", name.c_str(), ok, n);
  }
}

// Jump-forward: the same outputs as sampling every position, in fewer sampling steps.
TEST_F(Validity, JumpForwardSameOutputFewerSteps) {
  REQUIRE_VOCAB();
  struct Case {
    std::string name;
    Automaton a;
  };
  std::vector<Case> cases;
  cases.push_back({"intent schema", json_schema_automaton(ojson::parse(schemas()[0]))});
  cases.push_back({"rare characters 龘|𠀋", choices_automaton(choice_lists()[9])});
  cases.push_back({"choices New York...", choices_automaton(choice_lists()[3])});
  cases.push_back({"regex date", regex_automaton(regexes()[6])});
  int64_t saved_total = 0;
  for (const Case& cs : cases) {
    auto c = std::make_shared<const Constraint>(cs.a, *vocab_);
    int64_t plain = 0, jump = 0;
    for (int i = 0; i < 200; ++i) {
      const Output a = generate(c, *tok_, uint64_t(i) + 7, false, 512);
      const Output b = generate(c, *tok_, uint64_t(i) + 7, true, 512);
      ASSERT_EQ(a.tokens, b.tokens) << cs.name;
      plain += a.sampled;
      jump += b.sampled;
    }
    std::printf(
        "  jump-forward, %-22s sampling steps %lld -> %lld (text-level forced prefix "
        "from the start: \"%s\")\n",
        cs.name.c_str(), (long long)plain, (long long)jump,
        cs.a.forced_bytes(cs.a.start()).c_str());
    EXPECT_LE(jump, plain);
    saved_total += plain - jump;
  }
  EXPECT_GT(saved_total, 0);
}

}  // namespace
}  // namespace shrike::constrain
