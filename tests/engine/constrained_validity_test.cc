// Acceptance 1 of constrained decoding, through the whole serving path: 1,000 answers of a
// random-weight model, sampled at temperature 1 by the engine (continuous batching, jump-forward,
// the sampler's mask), under each of the 10 JSON schemas, 10 regexes and 10 choice lists of
// tests/constrain/validity_cases.h; every answer must end by itself and pass a validator that
// shares no code with the constraint compiler. tests/constrain/validity_test draws the same
// constraints uniformly over the allowed tokens of the 32k llama-spm vocabulary, without a model.
//
// The model is a random-weight synth model with its own 512-token SentencePiece-style vocabulary
// (control, 256 byte pieces, made-up word pieces): every character outside the word pieces,
// Chinese and Greek included, is spelled byte by byte, which the masks must keep valid UTF-8.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "constrain/constraint.h"
#include "constrain/spec.h"
#include "constrain/validity_cases.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "engine/stream_output.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "tokenizer/vocab.h"

namespace shrike::engine {
namespace {

using constrain::ConstraintSpec;
using ojson = nlohmann::ordered_json;
using namespace std::chrono_literals;
namespace validity = constrain::validity;

struct Served {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const constrain::TokenVocab> vocab;
};

const Served& served() {
  static const Served s = [] {
    test_util::Loaded l = test_util::load_synth(test_util::tiny_synth_options(DType::Q8_0, 23),
                                                "constrained_validity");
    Served m{std::move(l.model), std::move(l.tok), nullptr};
    m.vocab = constrain::TokenVocab::from_tokenizer(*m.tok);
    return m;
  }();
  return s;
}

// Runs n sampled answers under one constraint, all submitted at once, and checks each.
template <class Valid>
void check_answers(const std::string& name, const ConstraintSpec& spec, Valid valid) {
  const Served& m = served();
  const int n = validity::outputs_per_constraint();
  EngineConfig c;
  c.threads = 1;  // validity needs no parallelism; ctest runs binaries side by side
  c.scheduler.max_seqs = 64;
  c.scheduler.max_queue = n;
  Engine e(*m.model, *m.tok, c);
  const auto constraint =
      std::make_shared<const constrain::Constraint>(constrain::compile(spec), m.vocab);
  std::vector<std::shared_ptr<RequestStream>> streams;
  const std::vector<int32_t> prompt = m.tok->encode("Answer:", true);
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 512;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = uint64_t(i) + 1;
    r.constraint = constraint;
    auto s = e.submit(r);
    ASSERT_EQ(s.status, SubmitStatus::Accepted) << s.message;
    streams.push_back(s.stream);
  }
  int ok = 0, failures = 0;
  int64_t tokens = 0;
  std::set<std::string> distinct;
  for (auto& s : streams) {
    const test_util::Output o = test_util::collect(*s);
    tokens += int64_t(o.tokens.size());
    distinct.insert(o.text);
    std::string why;
    const bool ended = o.last.finish_reason == FinishReason::Stop;
    if (ended && valid(o.text, why)) {
      ++ok;
    } else if (++failures <= 4) {
      ADD_FAILURE() << name << ": invalid answer " << (ended ? "" : "(did not end) ")
                    << ::testing::PrintToString(o.text) << " " << why;
    }
  }
  for (int i = 0; i < 200 && e.gauges().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(e.gauges().kv_blocks_used, 0) << name;
  std::printf("  %-44s valid %d/%d  distinct %zu  mean tokens %.1f\n", name.substr(0, 44).c_str(),
              ok, n, distinct.size(), double(tokens) / n);
  EXPECT_EQ(ok, n) << name;
  EXPECT_GT(distinct.size(), 1u) << name << ": sampling at temperature 1 gave one answer only";
}

TEST(ConstrainedValidity, JsonSchemasThroughTheEngine) {
  for (const std::string& text : validity::schemas()) {
    ConstraintSpec spec{ConstraintSpec::Kind::JsonSchema, {}, {}, {}};
    spec.schema = ojson::parse(text);
    check_answers(text.substr(0, 60), spec, [&](const std::string& out, std::string& why) {
      nlohmann::json v;
      try {
        v = nlohmann::json::parse(out);
      } catch (const nlohmann::json::exception& e) {
        why = e.what();
        return false;
      }
      return validity::check(v, spec.schema, spec.schema, why);
    });
  }
}

TEST(ConstrainedValidity, RegexesThroughTheEngine) {
  for (const std::string& p : validity::regexes())
    check_answers(
        "regex " + p, ConstraintSpec{ConstraintSpec::Kind::Regex, {}, p, {}},
        [&](const std::string& out, std::string&) { return validity::regex_full_match(p, out); });
}

TEST(ConstrainedValidity, ChoicesThroughTheEngine) {
  for (const auto& list : validity::choice_lists()) {
    const std::set<std::string> set(list.begin(), list.end());
    check_answers("choice " + list[0] + " ...",
                  ConstraintSpec{ConstraintSpec::Kind::Choice, list, {}, {}},
                  [&](const std::string& out, std::string&) { return set.count(out) > 0; });
  }
}

}  // namespace
}  // namespace shrike::engine
