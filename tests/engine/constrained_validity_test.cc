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
#include <fstream>
#include <iterator>
#include <map>
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
namespace fs = std::filesystem;

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

// n answers sampled under one constraint, all submitted at once; the engine's KV blocks all
// return once they end.
std::vector<test_util::Output> sample_answers(const std::string& name, const ConstraintSpec& spec,
                                              int n, int max_tokens = 512) {
  const Served& m = served();
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
    r.max_tokens = max_tokens;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = uint64_t(i) + 1;
    r.constraint = constraint;
    auto s = e.submit(r);
    EXPECT_EQ(s.status, SubmitStatus::Accepted) << s.message;
    if (s.status != SubmitStatus::Accepted) return {};
    streams.push_back(s.stream);
  }
  std::vector<test_util::Output> out;
  for (auto& s : streams) out.push_back(test_util::collect(*s));
  for (int i = 0; i < 200 && e.gauges().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(e.gauges().kv_blocks_used, 0) << name;
  return out;
}

// Runs n sampled answers under one constraint and checks each.
template <class Valid>
void check_answers(const std::string& name, const ConstraintSpec& spec, Valid valid) {
  const int n = validity::outputs_per_constraint();
  int ok = 0, failures = 0;
  int64_t tokens = 0;
  std::set<std::string> distinct;
  for (const test_util::Output& o : sample_answers(name, spec, n)) {
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

// Acceptance 3 of the structured-outputs issue: one schema using every keyword of OpenAI's
// structured outputs, 1,000 answers at temperature 1, all valid under Ajv (draft 2020-12 with
// ajv-formats, run by Node.js from tests/constrain/schema_validator, installed by setup.sh).
TEST(ConstrainedValidity, EveryStructuredOutputsKeywordValidUnderAjv) {
  const fs::path validator_dir = fs::path(SHRIKE_SOURCE_DIR) / "tests/constrain/schema_validator";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0)
      << "Node.js is needed for this test (Node 20+): run scripts/setup.sh";
  ASSERT_TRUE(fs::exists(validator_dir / "node_modules/ajv-formats/package.json"))
      << "Ajv is not installed; run scripts/setup.sh or: npm ci --prefix "
      << validator_dir.string();
  const ojson schema = ojson::parse(R"({
    "$defs": {"Address": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 12},
        "zip": {"type": "string", "pattern": "[0-9]{5}"}},
      "required": ["city", "zip"], "additionalProperties": false}},
    "type": "object",
    "properties": {
      "id": {"type": "string", "format": "uuid"},
      "created": {"type": "string", "format": "date-time"},
      "day": {"type": "string", "format": "date"},
      "at": {"type": "string", "format": "time"},
      "wait": {"type": "string", "format": "duration"},
      "email": {"type": "string", "format": "email", "maxLength": 32},
      "host": {"type": "string", "format": "hostname", "maxLength": 24},
      "ip4": {"type": "string", "format": "ipv4"},
      "ip6": {"type": "string", "format": "ipv6"},
      "age": {"type": "integer", "minimum": 0, "maximum": 130},
      "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
      "price": {"type": "number", "minimum": 0, "maximum": 10000, "multipleOf": 0.01},
      "quantity": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000,
                   "multipleOf": 5},
      "kind": {"enum": ["order", "refund", "question"]},
      "version": {"const": 2},
      "order": {"anyOf": [{"type": "string", "pattern": "ORD-[0-9]{4,8}"}, {"type": "null"}]},
      "address": {"$ref": "#/$defs/Address"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 8},
               "minItems": 1, "maxItems": 3},
      "code": {"type": "string", "pattern": "[A-Z]{2,4}", "minLength": 3},
      "note": {"type": "string", "maxLength": 20}
    },
    "required": ["id", "kind", "version", "address", "tags", "price"],
    "additionalProperties": false
  })");
  ConstraintSpec spec{ConstraintSpec::Kind::JsonSchema, {}, {}, {}};
  spec.schema = schema;
  const int n = validity::outputs_per_constraint();
  const std::vector<test_util::Output> answers = sample_answers("every keyword", spec, n, 1000);
  ASSERT_EQ(int(answers.size()), n);
  const fs::path dir =
      fs::temp_directory_path() / ("shrike_structured_outputs_" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "schema.json") << schema.dump();
    std::ofstream lines(dir / "answers.jsonl");
    for (const auto& a : answers) {
      EXPECT_EQ(a.last.finish_reason, FinishReason::Stop) << "did not end: " << a.text;
      lines << nlohmann::json(a.text).dump() << "\n";
    }
  }
  std::set<std::string> distinct;
  std::map<std::string, int> written;  // property -> answers that have it
  for (const auto& a : answers) {
    distinct.insert(a.text);
    const auto v = nlohmann::json::parse(a.text, nullptr, false);
    if (v.is_object())
      for (const auto& [key, value] : v.items()) ++written[key];
  }
  EXPECT_GT(distinct.size(), size_t(n) / 2);
  // Every keyword is exercised: each optional property is written by some answers (checked on
  // the full 1,000; the sanitizer builds' 100 give some properties only ~5, too few to bound).
  std::printf("  answers with each property:");
  for (const auto& [key, value] : schema["properties"].items()) {
    std::printf(" %s %d", key.c_str(), written[key]);
    if (n >= 1000) {
      EXPECT_GT(written[key], n / 50) << key;
    }
  }
  std::printf(n >= 1000 ? "\n" : " (not bounded at %d answers)\n", n);
  std::printf("  first answer: %s\n", answers[0].text.c_str());
  const std::string cmd = "node " + (validator_dir / "validate.mjs").string() + " " +
                          (dir / "schema.json").string() + " " + (dir / "answers.jsonl").string() +
                          " > " + (dir / "ajv.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream report_file(dir / "ajv.txt");
  const std::string report((std::istreambuf_iterator<char>(report_file)), {});
  std::printf("%s", report.c_str());
  EXPECT_EQ(rc, 0) << report;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shrike::engine
