// Constrained decoding through the engine (issue 15): every output matches its constraint and
// ends with FinishReason::Stop when the constraint is complete; jump-forward gives the same
// tokens as stepping through forced positions one model call each (greedy and sampled), in fewer
// model calls; many constrained requests at once give their solo outputs; a constraint fully
// forced from the start needs no model call; speculative decoding (prompt lookup, a draft model)
// gives constrained decoding's outputs. On a random-weight synth model and stories260K.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "constrain/constraint.h"
#include "constrain/spec.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "engine/stream_output.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "shared_data.h"
#include "tokenizer/vocab.h"

namespace shrike::engine {
namespace {

using namespace std::chrono_literals;
using constrain::ConstraintSpec;
using ojson = nlohmann::ordered_json;

struct Loaded {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const constrain::TokenVocab> vocab;
};

Loaded load_gguf(const std::string& path) {
  Loaded l;
  l.model = model::load_model(path);
  l.tok = std::make_unique<tokenizer::Tokenizer>(
      tokenizer::vocab_from_gguf(gguf::GgufFile::open(path)));
  l.vocab = constrain::TokenVocab::from_tokenizer(*l.tok);
  return l;
}

Loaded make_synth(uint64_t seed) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("shrike_constrained_engine_" + std::to_string(getpid()) + "_" +
                     std::to_string(seed) + ".gguf");
  model::write_synth_model(test_util::tiny_synth_options(DType::F32, seed), path.string());
  Loaded m = load_gguf(path.string());
  std::filesystem::remove(path);
  return m;
}

const Loaded& synth() {
  static const Loaded l = make_synth(11);
  return l;
}

using test_util::collect;
using test_util::Output;

EngineConfig config(bool jump_forward = true) {
  EngineConfig c;
  c.scheduler.max_batch_tokens = 256;
  c.threads = 2;
  c.batch_invariant = true;
  c.jump_forward = jump_forward;
  return c;
}

// The constraints under test: a task-like schema (long forced runs: keys and punctuation), a
// regex and a choice list.
std::vector<ConstraintSpec> specs() {
  ConstraintSpec schema{ConstraintSpec::Kind::JsonSchema, {}, {}, {}};
  schema.schema = ojson::parse(R"({"type":"object","properties":{
      "intent":{"enum":["book_flight","cancel_booking","check_weather"]},
      "slots":{"type":"object","properties":{"city":{"type":"string","maxLength":6},
                                             "date":{"type":"string","maxLength":5}}}},
      "required":["intent","slots"]})");
  ConstraintSpec regex{ConstraintSpec::Kind::Regex, {}, "id-[0-9]{3}: (yes|no)", {}};
  ConstraintSpec choice{
      ConstraintSpec::Kind::Choice, {"alpha centauri", "beta", "gamma ray"}, {}, {}};
  return {schema, regex, choice};
}

// Independent of the compiler: nlohmann::json, std::regex, set membership.
bool valid(const ConstraintSpec& spec, const std::string& text) {
  switch (spec.kind) {
    case ConstraintSpec::Kind::JsonSchema: {
      const auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("intent") || !j.contains("slots"))
        return false;
      const std::set<std::string> intents{"book_flight", "cancel_booking", "check_weather"};
      if (!j["intent"].is_string() || !intents.count(j["intent"].get<std::string>())) return false;
      for (const auto& [k, v] : j["slots"].items())
        if ((k != "city" && k != "date") || !v.is_string()) return false;
      return true;
    }
    case ConstraintSpec::Kind::Regex:
      return std::regex_match(text, std::regex(spec.regex));
    case ConstraintSpec::Kind::Choice:
      return std::find(spec.choices.begin(), spec.choices.end(), text) != spec.choices.end();
    default:
      return false;
  }
}

GenerationRequest request(const Loaded& m, const ConstraintSpec& spec, const std::string& prompt,
                          float temperature = 0, uint64_t seed = 1) {
  GenerationRequest r;
  r.prompt = m.tok->encode(prompt, true);
  r.max_tokens = 200;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.constraint = std::make_shared<const constrain::Constraint>(constrain::compile(spec), m.vocab);
  return r;
}

std::vector<Output> run(const Loaded& m, const std::vector<GenerationRequest>& reqs,
                        const EngineConfig& c, bool concurrent = false) {
  Engine e(*m.model, *m.tok, c);
  std::vector<Output> out;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) {
    auto s = e.submit(r);
    EXPECT_EQ(s.status, SubmitStatus::Accepted) << s.message;
    if (concurrent)
      streams.push_back(s.stream);
    else
      out.push_back(collect(*s.stream));
  }
  for (auto& s : streams) out.push_back(collect(*s));
  for (int i = 0; i < 200 && e.gauges().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(e.gauges().kv_blocks_used, 0);
  return out;
}

const std::vector<std::string> kPrompts = {"Once upon a time", "The weather in Paris",
                                           "Book me a flight", "She said", "x"};

// Valid and Stop everywhere; jump-forward equal to step by step with fewer model calls.
void check_jump_forward(const Loaded& m, float temperature) {
  for (const auto& spec : specs()) {
    std::vector<GenerationRequest> reqs;
    for (size_t i = 0; i < kPrompts.size(); ++i)
      reqs.push_back(request(m, spec, kPrompts[i], temperature, 100 + i));
    const auto with = run(m, reqs, config(true));
    const auto without = run(m, reqs, config(false));
    int64_t steps_with = 0, steps_without = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE(constrain::kind_name(spec.kind) + std::string(" / ") + kPrompts[i]);
      EXPECT_TRUE(valid(spec, with[i].text)) << with[i].text;
      EXPECT_EQ(with[i].last.finish_reason, FinishReason::Stop);
      EXPECT_EQ(with[i].tokens, without[i].tokens);
      EXPECT_EQ(with[i].text, without[i].text);
      EXPECT_EQ(with[i].last.completion_tokens, int64_t(with[i].tokens.size()));
      EXPECT_LE(with[i].last.model_steps, without[i].last.model_steps);
      steps_with += with[i].last.model_steps;
      steps_without += without[i].last.model_steps;
    }
    // The schema and the regex have forced runs (keys, punctuation, "id-"); each costs one
    // model call per token without jump-forward.
    if (spec.kind != ConstraintSpec::Kind::Choice) {
      EXPECT_LT(steps_with, steps_without);
    }
    std::printf("%s: %lld model calls with jump-forward, %lld without, over %zu answers\n",
                constrain::kind_name(spec.kind), (long long)steps_with, (long long)steps_without,
                reqs.size());
  }
}

TEST(ConstrainedEngine, SynthGreedyValidAndJumpForwardEqual) {
  check_jump_forward(synth(), 0);
}

TEST(ConstrainedEngine, SynthSampledJumpForwardEqual) {
  check_jump_forward(synth(), 1.0f);
}

TEST(ConstrainedEngine, Stories260KGreedyValidAndJumpForwardEqual) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  static const Loaded m =
      load_gguf(testing::shared_dir() + "/reference/stories260K/stories260K.gguf");
  check_jump_forward(m, 0);
}

// A choice costs the tokens of its own tokenization, whatever the model samples: with max_tokens
// the longest choice's token count (+ EOS), every answer at temperature 1 is a whole choice, on
// a real vocabulary (stories260K's SentencePiece) and a random one (synth). Before, a model free
// to pick " w" "ant" "ed" for " wanted" spent 19-33 tokens on a 13-token choice.
TEST(ConstrainedEngine, ChoicesFitTheirTokenizersTokenCount) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  static const Loaded stories =
      load_gguf(testing::shared_dir() + "/reference/stories260K/stories260K.gguf");
  const ConstraintSpec spec{ConstraintSpec::Kind::Choice,
                            {"she wanted to play with the big red ball", "she was sad",
                             "talk to a human", "talk to an agent"},
                            {},
                            {}};
  for (const Loaded* m : {&stories, &synth()}) {
    int64_t longest = 0;
    for (const std::string& c : spec.choices)  // " " + c: the dummy prefix the answer drops
      longest = std::max<int64_t>(longest, int64_t(m->tok->encode(c, false).size()));
    std::vector<GenerationRequest> reqs;
    for (uint64_t seed = 1; seed <= 24; ++seed) {
      reqs.push_back(request(*m, spec, "Lily said", 1.0f, seed));
      reqs.back().max_tokens = longest + 1;
    }
    for (const auto& out : run(*m, reqs, config())) {
      EXPECT_TRUE(valid(spec, out.text)) << "'" << out.text << "' cut at " << longest + 1;
      EXPECT_EQ(out.last.finish_reason, FinishReason::Stop) << out.text;
    }
  }
}

TEST(ConstrainedEngine, ConcurrentEqualsSolo) {
  const Loaded& m = synth();
  std::vector<GenerationRequest> reqs;
  for (const auto& spec : specs())
    for (size_t i = 0; i < kPrompts.size(); ++i)
      reqs.push_back(request(m, spec, kPrompts[i], 0.8f, 7 + i));
  const auto solo = run(m, reqs, config());
  const auto together = run(m, reqs, config(), true);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(solo[i].tokens, together[i].tokens) << i;
  }
}

TEST(ConstrainedEngine, FullyForcedNeedsNoModelCall) {
  const Loaded& m = synth();
  // One choice: its tokens are the tokenizer's (the dummy-prefix space and "7" as the encoder
  // spells " 7"), so nothing is left to the model and jump-forward answers without a model call.
  // Without the tokenizer's tokens the model could also begin with the dropped space alone.
  const ConstraintSpec one{ConstraintSpec::Kind::Choice, {"7"}, {}, {}};
  const auto out = run(m, {request(m, one, "Question")}, config());
  EXPECT_EQ(out[0].text, "7");
  EXPECT_EQ(out[0].last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(out[0].last.model_steps, 0);
  const auto stepped = run(m, {request(m, one, "Question")}, config(false));
  EXPECT_EQ(stepped[0].tokens, out[0].tokens);
  EXPECT_EQ(stepped[0].last.model_steps, int64_t(out[0].tokens.size()));
}

TEST(ConstrainedEngine, MaxTokensCutsAForcedRun) {
  const Loaded& m = synth();
  const ConstraintSpec one{ConstraintSpec::Kind::Choice, {"a rather long forced answer"}, {}, {}};
  GenerationRequest r = request(m, one, "Question");
  r.max_tokens = 3;
  const auto out = run(m, {r}, config());
  EXPECT_EQ(out[0].tokens.size(), 3u);
  EXPECT_EQ(out[0].last.finish_reason, FinishReason::Length);
  EXPECT_EQ(out[0].last.completion_tokens, 3);
}

// Prompts holding answers the constraints allow, for prompt lookup to find.
const std::vector<std::string> kSpecPrompts = {
    R"(Repeat: {"intent":"book_flight","slots":{"city":"Paris"}} and again {"intent":"bo)",
    "id-042: yes, id-042: yes, id-0", "alpha centauri or gamma ray, gamma", "x"};

// Speculative decoding of constrained requests: drafts are cut where the constraint refuses them
// (forced positions take the forced token) and each verified row is sampled under its
// position's mask, so greedy outputs, logprobs included, are constrained decoding's without
// speculation: with prompt lookup (prompts that contain allowed answers), the model as its own
// draft (drafts mostly right) and a random model as the draft (mostly wrong), with and without
// jump-forward, alone and all at once. Sampled outputs stay valid and complete.
TEST(ConstrainedEngine, SpeculationGivesNonSpeculativeOutputs) {
  const Loaded& m = synth();
  static const Loaded random_draft = make_synth(23);
  const std::vector<std::string> prompts = kSpecPrompts;
  // Drafts proposed and accepted per proposer (ngram, self, random), summed over constraints.
  int64_t proposed[3] = {}, accepted[3] = {};
  for (const auto& spec : specs()) {
    for (const bool jump : {true, false}) {
      std::vector<GenerationRequest> reqs;
      for (size_t i = 0; i < prompts.size(); ++i) {
        reqs.push_back(request(m, spec, prompts[i]));
        reqs.back().sampling.logprobs = true;
        reqs.back().sampling.top_logprobs = 2;
      }
      const auto want = run(m, reqs, config(jump));
      const std::vector<std::pair<SpecMode, const model::Model*>> proposers = {
          {SpecMode::Ngram, nullptr},
          {SpecMode::Draft, m.model.get()},
          {SpecMode::Draft, random_draft.model.get()}};
      for (size_t p = 0; p < proposers.size(); ++p) {
        const auto& [mode, draft] = proposers[p];
        EngineConfig c = config(jump);
        c.spec.mode = mode;
        c.spec.draft = draft;
        c.spec.max_k = 5;
        c.spec.max_batch_tokens = 256;  // speculate in every step, however many sequences run
        c.spec.cost_aware = false;      // and draft whatever the draft costs (the verifier's test)
        for (const bool concurrent : {false, true}) {
          SCOPED_TRACE(std::string(constrain::kind_name(spec.kind)) + " " + spec_mode_name(mode) +
                       (draft == m.model.get() ? " (self)" : "") + (jump ? " jump-forward" : "") +
                       (concurrent ? " concurrent" : ""));
          const auto got = run(m, reqs, c, concurrent);
          for (size_t i = 0; i < reqs.size(); ++i) {
            EXPECT_EQ(got[i].tokens, want[i].tokens) << prompts[i];
            EXPECT_EQ(got[i].text, want[i].text) << prompts[i];
            EXPECT_EQ(got[i].last.finish_reason, want[i].last.finish_reason) << prompts[i];
            ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << prompts[i];
            for (size_t j = 0; j < got[i].logprobs.size(); ++j) {
              EXPECT_EQ(got[i].logprobs[j].logprob, want[i].logprobs[j].logprob) << i << " " << j;
              ASSERT_EQ(got[i].logprobs[j].top.size(), want[i].logprobs[j].top.size());
              for (size_t t = 0; t < got[i].logprobs[j].top.size(); ++t)
                EXPECT_EQ(got[i].logprobs[j].top[t].token, want[i].logprobs[j].top[t].token);
            }
            EXPECT_TRUE(got[i].last.speculative);
            EXPECT_LE(got[i].last.spec_accepted, got[i].last.spec_proposed);
            proposed[p] += got[i].last.spec_proposed;
            accepted[p] += got[i].last.spec_accepted;
          }
        }
      }
    }
  }
  // Every proposer drafted (prompt lookup finds the answers in the prompts); the model as its
  // own draft is mostly right.
  for (int p = 0; p < 3; ++p) EXPECT_GT(proposed[p], 0) << p;
  EXPECT_GT(accepted[0], 0);
  EXPECT_GT(accepted[1], proposed[1] / 2);
}

TEST(ConstrainedEngine, SpeculativeSamplingStaysValid) {
  const Loaded& m = synth();
  for (const SpecMode mode : {SpecMode::Ngram, SpecMode::Draft}) {
    EngineConfig c = config();
    c.spec.mode = mode;
    c.spec.draft = m.model.get();
    c.spec.max_batch_tokens = 256;
    c.spec.cost_aware = false;
    const std::vector<ConstraintSpec> all = specs();
    std::vector<GenerationRequest> reqs;
    for (const auto& spec : all)
      for (size_t i = 0; i < kSpecPrompts.size(); ++i)
        reqs.push_back(request(m, spec, kSpecPrompts[i], 1.0f, 40 + i));
    const auto out = run(m, reqs, c, true);
    int64_t proposed = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const ConstraintSpec& spec = all[i / kSpecPrompts.size()];
      EXPECT_TRUE(valid(spec, out[i].text)) << out[i].text;
      EXPECT_EQ(out[i].last.finish_reason, FinishReason::Stop);
      EXPECT_LE(out[i].last.spec_accepted, out[i].last.spec_proposed);
      proposed += out[i].last.spec_proposed;
    }
    // The model as its own draft drafts at every real choice (prompt lookup may find nothing
    // along the sampled paths).
    if (mode == SpecMode::Draft) {
      EXPECT_GT(proposed, 0);
    }
  }
}

}  // namespace
}  // namespace shrike::engine
