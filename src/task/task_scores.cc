#include "task/task_scores.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace shrike::task {
namespace {

double ratio(int64_t num, int64_t den) {
  return den > 0 ? double(num) / double(den) : 0.0;
}

void add_example(ScoreCounts& c, const data::Example& gold, const TaskPrediction& pred) {
  ++c.n;
  const bool intent_ok = pred.intent == gold.intent;
  c.intent_correct += intent_ok;
  int64_t matched = 0;
  for (const auto& [name, value] : pred.slots) {
    const auto it = gold.slots.find(name);
    matched += it != gold.slots.end() && it->second == value;
  }
  c.slot_true_positives += matched;
  c.slot_predicted += int64_t(pred.slots.size());
  c.slot_gold += int64_t(gold.slots.size());
  c.exact_correct += pred.parsed && intent_ok && pred.slots == gold.slots;
  c.parse_failures += !pred.parsed;
}

std::string lower_ascii(std::string s) {
  for (char& ch : s)
    if (ch >= 'A' && ch <= 'Z') ch = char(ch - 'A' + 'a');
  return s;
}

// The kinds of SlotErrorCounts for one example (see task_scores.h).
void add_slot_errors(SlotErrorCounts& e, const data::Example& gold, const TaskPrediction& pred) {
  if (!pred.parsed) {
    e.unparsed += int64_t(gold.slots.size());
    return;
  }
  const std::string utterance = task_utterance(gold.text);
  std::set<std::string> counted;  // predicted names whose error is already counted
  for (const auto& [name, value] : gold.slots) {
    const auto it = pred.slots.find(name);
    if (it != pred.slots.end()) {
      if (it->second == value) continue;
      const std::string& p = it->second;
      if (lower_ascii(p) == lower_ascii(value))
        ++e.case_only;
      else if (p.find(value) != std::string::npos || value.find(p) != std::string::npos)
        ++e.boundary;
      else
        ++e.wrong_value;
      counted.insert(name);
      continue;
    }
    const std::string& gold_value = value;  // (a lambda cannot capture a structured binding)
    const auto other = std::find_if(pred.slots.begin(), pred.slots.end(), [&](const auto& kv) {
      return kv.second == gold_value && !gold.slots.contains(kv.first) &&
             !counted.contains(kv.first);
    });
    if (other != pred.slots.end()) {
      ++e.wrong_type;
      counted.insert(other->first);
    } else {
      ++e.missing;
    }
  }
  for (const auto& [name, value] : pred.slots) {
    const auto it = gold.slots.find(name);
    if (it != gold.slots.end() && it->second == value) continue;
    e.not_in_utterance += utterance.find(value) == std::string::npos;
    if (!counted.contains(name)) ++e.spurious;
  }
}

void finish(ScoreCounts& c) {
  c.intent_accuracy = ratio(c.intent_correct, c.n);
  c.exact_accuracy = ratio(c.exact_correct, c.n);
  c.slot_precision = c.slot_predicted > 0 ? ratio(c.slot_true_positives, c.slot_predicted)
                                          : (c.slot_gold == 0 ? 1.0 : 0.0);
  c.slot_recall = c.slot_gold > 0 ? ratio(c.slot_true_positives, c.slot_gold)
                                  : (c.slot_predicted == 0 ? 1.0 : 0.0);
  const double sum = c.slot_precision + c.slot_recall;
  c.slot_f1 = sum > 0 ? 2 * c.slot_precision * c.slot_recall / sum : 0.0;
}

std::string shown(const std::string& name) {
  return name.empty() ? "(none)" : name;
}

std::string printf_string(const char* fmt, auto... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string s(size_t(n) + 1, '\0');
  std::snprintf(s.data(), s.size(), fmt, args...);
  s.resize(size_t(n));
  return s;
}

nlohmann::ordered_json counts_json(const ScoreCounts& c) {
  return {{"n", c.n},
          {"intent_correct", c.intent_correct},
          {"intent_accuracy", c.intent_accuracy},
          {"slot_true_positives", c.slot_true_positives},
          {"slot_predicted", c.slot_predicted},
          {"slot_gold", c.slot_gold},
          {"slot_precision", c.slot_precision},
          {"slot_recall", c.slot_recall},
          {"slot_f1", c.slot_f1},
          {"exact_correct", c.exact_correct},
          {"exact_accuracy", c.exact_accuracy},
          {"parse_failures", c.parse_failures}};
}

}  // namespace

TaskScores score_task(const std::vector<data::Example>& gold,
                      const std::vector<TaskPrediction>& pred) {
  if (gold.size() != pred.size())
    throw std::invalid_argument("score_task: " + std::to_string(gold.size()) +
                                " gold examples but " + std::to_string(pred.size()) +
                                " predictions");
  TaskScores s;
  std::map<std::pair<std::string, std::string>, int64_t> confusions;
  for (size_t i = 0; i < gold.size(); ++i) {
    add_example(s, gold[i], pred[i]);
    add_slot_errors(s.slot_errors, gold[i], pred[i]);
    add_example(s.per_language[gold[i].lang], gold[i], pred[i]);
    IntentAccuracy& per_intent = s.per_intent[gold[i].intent];
    ++per_intent.n;
    if (pred[i].intent == gold[i].intent)
      ++per_intent.correct;
    else
      ++confusions[{gold[i].intent, pred[i].intent}];
  }
  finish(s);
  for (auto& [lang, c] : s.per_language) finish(c);
  for (auto& [intent, a] : s.per_intent) a.accuracy = ratio(a.correct, a.n);
  for (const auto& [pair, count] : confusions)
    s.confusions.push_back({pair.first, pair.second, count});
  // The map already orders by names, so a stable sort by count keeps ties in name order.
  std::stable_sort(s.confusions.begin(), s.confusions.end(),
                   [](const Confusion& a, const Confusion& b) { return a.count > b.count; });
  return s;
}

std::string format_scores(const TaskScores& s, int top_confusions) {
  auto block = [](const ScoreCounts& c, const std::string& indent) {
    return printf_string("%sintent accuracy  %.4f (%lld/%lld)\n", indent.c_str(), c.intent_accuracy,
                         (long long)c.intent_correct, (long long)c.n) +
           printf_string(
               "%sslot P/R/F1      %.4f / %.4f / %.4f (%lld correct, %lld predicted, "
               "%lld gold)\n",
               indent.c_str(), c.slot_precision, c.slot_recall, c.slot_f1,
               (long long)c.slot_true_positives, (long long)c.slot_predicted,
               (long long)c.slot_gold) +
           printf_string("%sexact match      %.4f (%lld/%lld)\n", indent.c_str(), c.exact_accuracy,
                         (long long)c.exact_correct, (long long)c.n) +
           printf_string("%sparse failures   %lld (%.2f%%)\n", indent.c_str(),
                         (long long)c.parse_failures, 100 * ratio(c.parse_failures, c.n));
  };
  std::string out = printf_string("examples         %lld\n", (long long)s.n) + block(s, "");
  if (!s.per_language.empty()) {
    out += "per language:\n";
    for (const auto& [lang, c] : s.per_language)
      out += printf_string(
          "  %-8s n=%-6lld intent %.4f  slot F1 %.4f  exact %.4f  parse "
          "failures %lld\n",
          shown(lang).c_str(), (long long)c.n, c.intent_accuracy, c.slot_f1, c.exact_accuracy,
          (long long)c.parse_failures);
  }
  const SlotErrorCounts& e = s.slot_errors;
  if (s.slot_gold > 0 || s.slot_predicted > 0)
    out += printf_string(
        "slot errors      %lld boundary, %lld wrong value, %lld case only, %lld wrong type, "
        "%lld missing, %lld spurious, %lld in unparsed answers; %lld wrong values not in the "
        "utterance\n",
        (long long)e.boundary, (long long)e.wrong_value, (long long)e.case_only,
        (long long)e.wrong_type, (long long)e.missing, (long long)e.spurious, (long long)e.unparsed,
        (long long)e.not_in_utterance);
  if (!s.confusions.empty() && top_confusions > 0) {
    out += "top confusions (gold -> predicted):\n";
    const size_t shown_n = std::min(s.confusions.size(), size_t(top_confusions));
    for (size_t i = 0; i < shown_n; ++i) {
      const Confusion& c = s.confusions[i];
      out += printf_string("  %6lld  %s -> %s\n", (long long)c.count, shown(c.gold).c_str(),
                           shown(c.predicted).c_str());
    }
  }
  return out;
}

std::string scores_json(const TaskScores& s) {
  nlohmann::ordered_json j = counts_json(s);
  const SlotErrorCounts& e = s.slot_errors;
  j["slot_errors"] = {{"boundary", e.boundary},   {"wrong_value", e.wrong_value},
                      {"case_only", e.case_only}, {"wrong_type", e.wrong_type},
                      {"missing", e.missing},     {"spurious", e.spurious},
                      {"unparsed", e.unparsed},   {"not_in_utterance", e.not_in_utterance}};
  j["per_language"] = nlohmann::ordered_json::object();
  for (const auto& [lang, c] : s.per_language) j["per_language"][lang] = counts_json(c);
  j["per_intent"] = nlohmann::ordered_json::object();
  for (const auto& [intent, a] : s.per_intent)
    j["per_intent"][intent] = {{"n", a.n}, {"correct", a.correct}, {"accuracy", a.accuracy}};
  j["confusions"] = nlohmann::ordered_json::array();
  for (const Confusion& c : s.confusions)
    j["confusions"].push_back({{"gold", c.gold}, {"predicted", c.predicted}, {"count", c.count}});
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace shrike::task
