// What constrained decoding costs per decode step, with real vocabularies: the cold cost (compile
// the automaton, build the vocabulary trie once per model, compute each automaton state's mask
// the first time it is reached) and the warm cost (cached mask lookup + applying the mask to the
// logits + advancing the state), on the intent JSON schema, a regex and json_object; and the
// task answer of a task model (task/answer_constraint.h) both with any string as a slot value and
// with values copied from each request's utterance, where every request builds its own values
// automaton and computes the masks of the states near and inside its values (counted in its
// steps: "warm" then means the shared part's masks are cached, the per-request part never is).
//
// Outputs are drawn uniformly from the allowed tokens (random logits), so the states visited are
// those of real constrained generations. --step-ms gives a model's decode step for the
// percentage column (e.g. from `shrike bench`).
//
//   build/bench/constraint/constraint_bench --step-ms 12.3 [VOCAB.gguf ...]
// Without vocabularies: llama-spm and the largest vocabulary in ../shared/reference/tokenizers.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "constrain/spec.h"
#include "gguf/gguf.h"
#include "task/answer_constraint.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace shrike;
using Clock = std::chrono::steady_clock;
using ojson = nlohmann::ordered_json;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

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

std::vector<std::string> intent_labels() {
  std::vector<std::string> labels;
  for (const char* d : {"order", "refund", "account", "shipping", "payment", "product"})
    for (const char* a : {"status", "cancel", "change", "complaint", "question", "other"})
      labels.push_back(std::string(d) + "_" + a);
  return labels;
}

const std::vector<std::string> kSlotNames{"order_id", "product",  "quantity", "date",  "time",
                                          "city",     "address",  "name",     "phone", "email",
                                          "amount",   "currency", "reason",   "color"};

// Utterances of the built-in data's kind and length, English and Chinese.
const std::vector<std::string> kUtterances{
    "hi team, I changed my mind, cancel order JD561901674134?",
    "麻烦问一下，可以改到下周四配送，急用",
    "Hey, update the payment for order #NRGMPA to Visa ending in 8953 as soon as possible",
    "麻烦问一下，订单ORD-256099改个时间送，多谢",
    "where is my order SO12345",
    "Ok so do not renew my subscription after tomorrow?"};

std::string intent_schema() {
  const std::vector<std::string> labels = intent_labels();
  ojson slots = ojson::object();
  for (const std::string& s : kSlotNames) slots[s] = {{"type", "string"}, {"maxLength", 24}};
  return ojson({{"type", "object"},
                {"properties",
                 {{"intent", {{"enum", labels}}},
                  {"slots", {{"type", "object"}, {"properties", slots}}}}},
                {"required", {"intent", "slots"}}})
      .dump();
}

struct Row {
  std::string vocab, constraint;
  int64_t n_vocab = 0;
  double vocab_ms = 0, compile_ms = 0;
  int32_t dfa_states = 0;
  int64_t masks = 0;
  double mask_mean_ms = 0, mask_max_ms = 0;
  double cold_step_us = 0, warm_step_us = 0, apply_us = 0;
  int64_t steps = 0;
};

// per_request: the constraint of output i from the shared one (timed with the output's steps);
// none: every output uses the shared one.
using PerRequest = std::function<std::shared_ptr<const constrain::Constraint>(
    const std::shared_ptr<const constrain::Constraint>& shared, int output)>;

Row measure(const std::string& vocab_name, const tokenizer::Tokenizer& tok,
            const std::shared_ptr<const constrain::TokenVocab>& tv, double vocab_ms,
            const std::string& name, const std::function<constrain::Automaton()>& compile,
            const PerRequest& per_request = nullptr) {
  Row r;
  r.vocab = vocab_name;
  r.constraint = name;
  r.n_vocab = tok.n_vocab();
  r.vocab_ms = vocab_ms;
  auto t = Clock::now();
  constrain::Automaton a = compile();
  r.compile_ms = ms_since(t);
  r.dfa_states = a.n_states();
  const auto shared = std::make_shared<const constrain::Constraint>(std::move(a), tv);
  auto request = [&](int i) { return per_request ? per_request(shared, i) : shared; };

  // Cold: generations from an empty cache, timing every constraint call; mask computations
  // timed apart too.
  constexpr int kOutputs = 64, kMaxTokens = 96;
  std::vector<std::vector<int32_t>> outputs;
  double cold_ms = 0;
  int64_t cold_steps = 0;
  std::vector<double> mask_ms;
  for (int i = 0; i < kOutputs; ++i) {
    t = Clock::now();
    const auto c = request(i);
    cold_ms += ms_since(t);
    constrain::ConstraintState st(c);
    std::vector<int32_t> out;
    while (int(out.size()) < kMaxTokens && !st.is_complete()) {
      const int64_t before = c->masks_computed() + shared->masks_computed();
      t = Clock::now();
      const auto& m = st.allowed_mask();
      const double dt = ms_since(t);
      if (c->masks_computed() + shared->masks_computed() > before) mask_ms.push_back(dt);
      const int32_t tok_id =
          nth_allowed(m, mix(uint64_t(i) * 7919 + out.size()) % uint64_t(m.count()));
      t = Clock::now();
      st.advance(tok_id);
      cold_ms += dt + ms_since(t);
      ++cold_steps;
      out.push_back(tok_id);
      if (tok_id == tok.eos()) break;
    }
    outputs.push_back(std::move(out));
  }
  r.masks = int64_t(mask_ms.size());
  for (double m : mask_ms) r.mask_mean_ms += m / double(std::max<size_t>(1, mask_ms.size()));
  r.mask_max_ms = mask_ms.empty() ? 0 : *std::max_element(mask_ms.begin(), mask_ms.end());
  r.cold_step_us = cold_ms * 1000 / double(cold_steps);

  // Warm: replay the same outputs; per step: cached mask + apply to logits + advance.
  std::vector<float> logits(size_t(tok.n_vocab()), 0.5f);
  int64_t steps = 0;
  double warm_ms = 1e300;
  for (int rep = 0; rep < 5; ++rep) {  // best of 5
    steps = 0;
    t = Clock::now();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto& out = outputs[i];
      constrain::ConstraintState st(request(int(i)));
      for (int32_t id : out) {
        decode::apply_token_mask(logits.data(), tok.n_vocab(), st.allowed_mask());
        st.advance(id);
        ++steps;
      }
    }
    warm_ms = std::min(warm_ms, ms_since(t));
  }
  r.steps = steps;
  r.warm_step_us = warm_ms * 1000 / double(steps);
  // The mask application alone (the part that scales with the vocabulary).
  constrain::ConstraintState st(shared);
  const auto& m = st.allowed_mask();
  t = Clock::now();
  for (int i = 0; i < 1000; ++i) decode::apply_token_mask(logits.data(), tok.n_vocab(), m);
  r.apply_us = ms_since(t);  // ms per 1000 = us per call
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double step_ms = 0;
  std::vector<std::string> vocabs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--step-ms" && i + 1 < argc) {
      step_ms = std::atof(argv[++i]);
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: constraint_bench [--step-ms MS] [VOCAB.gguf ...]\n");
      return 0;
    } else {
      vocabs.push_back(a);
    }
  }
  if (vocabs.empty()) {
    const auto dir = std::filesystem::path(SHRIKE_SOURCE_DIR).parent_path() / "shared" /
                     "reference" / "tokenizers";
    if (!std::filesystem::exists(dir)) {
      std::fprintf(stderr, "no vocabularies given and %s is absent\n", dir.c_str());
      return 2;
    }
    std::string largest;
    int32_t largest_n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() != ".gguf") continue;
      try {
        const auto v = tokenizer::vocab_from_gguf(gguf::GgufFile::open(e.path().string()));
        std::printf("vocabulary %-28s %7d tokens\n", e.path().filename().c_str(), v.size());
        if (v.size() > largest_n) largest_n = v.size(), largest = e.path().string();
      } catch (const std::exception& ex) {
        std::printf("vocabulary %-28s unreadable: %s\n", e.path().filename().c_str(), ex.what());
      }
    }
    vocabs = {(dir / "ggml-vocab-llama-spm.gguf").string(), largest};
  }

  std::vector<Row> rows;
  for (const std::string& path : vocabs) {
    const tokenizer::Tokenizer tok(tokenizer::vocab_from_gguf(gguf::GgufFile::open(path)));
    auto t = Clock::now();
    const auto tv = constrain::TokenVocab::from_tokenizer(tok);
    const double vocab_ms = ms_since(t);
    const std::string name = std::filesystem::path(path).stem().string();
    const ojson schema = ojson::parse(intent_schema());
    rows.push_back(measure(name, tok, tv, vocab_ms, "intent schema",
                           [&] { return constrain::json_schema_automaton(schema); }));
    rows.push_back(measure(name, tok, tv, vocab_ms, "task answer", [] {
      return task::task_answer_automaton(intent_labels(), kSlotNames);
    }));
    rows.push_back(measure(
        name, tok, tv, vocab_ms, "task answer, values from the utterance",
        [] {
          return task::task_answer_automaton(intent_labels(), kSlotNames, task::kTaskValueMaxChars,
                                             task::kTaskMaxSlotPairs, task::TaskValues::Hole);
        },
        [](const std::shared_ptr<const constrain::Constraint>& holes, int i) {
          return constrain::Constraint::with_holes_filled(
              holes, task::task_values_automaton(kUtterances[size_t(i) % kUtterances.size()]));
        }));
    rows.push_back(measure(name, tok, tv, vocab_ms, "regex email", [] {
      return constrain::regex_automaton("[a-z0-9._]{1,20}@[a-z0-9]{1,12}\\.(com|org|net|de)");
    }));
    rows.push_back(measure(name, tok, tv, vocab_ms, "json_object",
                           [] { return constrain::json_object_automaton(); }));
  }
  std::printf(
      "\n| vocabulary | tokens | constraint | trie build ms | compile ms | DFA states | masks "
      "computed | mask ms (mean / max) | cold us/step | warm us/step | apply-mask us | warm %% "
      "of step |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf(
        "| %s | %lld | %s | %.1f | %.1f | %d | %lld | %.2f / %.2f | %.1f | %.2f | %.2f | %s |\n",
        r.vocab.c_str(), (long long)r.n_vocab, r.constraint.c_str(), r.vocab_ms, r.compile_ms,
        r.dfa_states, (long long)r.masks, r.mask_mean_ms, r.mask_max_ms, r.cold_step_us,
        r.warm_step_us, r.apply_us,
        step_ms > 0 ? (std::to_string(r.warm_step_us / 10 / step_ms).substr(0, 5) + "%").c_str()
                    : "-");
  return 0;
}
