#include "optimize/report.h"

#include <cmath>
#include <cstdio>

namespace shrike::optimize {
namespace {

std::string fmt(double v, const char* f = "%.1f") {
  if (!std::isfinite(v)) return std::isinf(v) ? "inf" : "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string mb(int64_t bytes) {
  return bytes < 0 ? "–" : fmt(double(bytes) / 1e6, "%.2f");
}
std::string pct(double f) {
  return fmt(100 * f, "%.1f%%");
}
// "x0.42" of a stage's value to stage 0's.
std::string ratio(double v, double base) {
  return std::isfinite(v) && std::isfinite(base) && base > 0 ? fmt(v / base, "x%.2f") : "–";
}

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

const StageResult* baseline(const Report& r) {
  for (const auto& s : r.stages)
    if (s.stage.available) return &s;
  return nullptr;
}

std::string label(const StageResult& s) {
  return "stage " + std::to_string(s.stage.id);
}

}  // namespace

std::string render_markdown(const Report& r) {
  std::string o = "# shrike optimize: the staged report\n\n";
  o += "- command: `" + r.command + "`\n";
  o += "- machine: " + r.machine + "\n";
  o += "- held-out requests: the " + std::to_string(r.test_requests) + " utterances of " +
       r.data_dir + "/test.jsonl in order, as the task prompt, greedy, max_tokens " +
       std::to_string(r.max_tokens) + "\n";
  o += "- teacher: " + r.teacher_origin + "\n";
  o += "- latency budget " + fmt(r.budget_ms, "%g") + " ms end to end, " + pct(r.target) +
       " of requests within it; open loop: gamma arrivals, burstiness " + fmt(r.burstiness, "%g") +
       "; common rate " + fmt(r.common_rate, "%.2f") + " req/s\n";
  o += "- wall time of this run: " + fmt(r.wall_s, "%.0f") + " s\n\n";

  o += "| stage | model | P50 ms (c=1) | P99 ms (c=1) | max req/s within " +
       fmt(r.budget_ms, "%g") + " ms | queue wait P99 ms @" + fmt(r.common_rate, "%.2f") +
       " | timeouts @" + fmt(r.common_rate, "%.2f") +
       " | weights MB | KV MB | peak RSS MB | intent clean / noisy | slot F1 clean / noisy |\n";
  o += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : r.stages) {
    o += "| " + std::to_string(s.stage.id) + " " + s.stage.name + " | ";
    if (!s.stage.available) {
      o += "not available: " + s.stage.reason + " | | | | | | | | | | |\n";
      continue;
    }
    o += std::string(stage_model_name(s.stage.model)) + " | " + fmt(s.p50_ms) + " | " +
         fmt(s.p99_ms) + " | " + fmt(s.rate.best_rate, "%.2f") + " | " +
         fmt(s.queue_wait_p99_ms, "%.0f") + " | " + pct(s.timeout_rate) + " | " +
         mb(s.weight_bytes) + " | " + mb(s.kv_bytes) + " | " + mb(s.peak_rss_bytes) + " | " +
         pct(s.clean.intent) + " / " + pct(s.noisy.intent) + " | " + pct(s.clean.slot_f1) + " / " +
         pct(s.noisy.slot_f1) + " |\n";
  }

  if (const StageResult* b = baseline(r)) {
    o += "\n## Ratios to stage 0\n\n";
    o += "| stage | P50 | P99 | max req/s | weights | KV | peak RSS | noisy intent |\n";
    o += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& s : r.stages) {
      if (!s.stage.available) {
        o += "| " + std::to_string(s.stage.id) + " | not available | | | | | | |\n";
        continue;
      }
      o += "| " + std::to_string(s.stage.id) + " | " + ratio(s.p50_ms, b->p50_ms) + " | " +
           ratio(s.p99_ms, b->p99_ms) + " | " + ratio(s.rate.best_rate, b->rate.best_rate) + " | " +
           ratio(double(s.weight_bytes), double(b->weight_bytes)) + " | " +
           ratio(double(s.kv_bytes), double(b->kv_bytes)) + " | " +
           ratio(double(s.peak_rss_bytes), double(b->peak_rss_bytes)) + " | " +
           ratio(s.noisy.intent, b->noisy.intent) + " |\n";
    }
  }

  o += "\n## What each stage changes\n\nRead from each server's own `/v1/models` (the `shrike` "
       "field: effective options after the engine's adjustments), against the previous measured "
       "stage.\n\n";
  for (const auto& s : r.stages) {
    o += "- **stage " + std::to_string(s.stage.id) + "** (" + s.stage.name + "): ";
    if (!s.stage.available) {
      o += "not available (" + s.stage.reason + ")\n";
      continue;
    }
    if (s.changes.empty()) {
      o += s.stage.id == r.stages.front().stage.id ? "the baseline" : "no option differs";
    } else {
      for (size_t i = 0; i < s.changes.size(); ++i) o += (i ? "; `" : "`") + s.changes[i] + "`";
    }
    o += "\n  - `" + s.serve_command + "`\n";
  }

  o += "\n## Rate search\n\nEach probe replays the test prompts in order with gamma arrivals; it "
       "passes when " +
       pct(r.target) + " of its requests finish within " + fmt(r.budget_ms, "%g") + " ms.\n\n";
  for (const auto& s : r.stages) {
    if (!s.stage.available) continue;
    o += "- stage " + std::to_string(s.stage.id) + ":";
    for (const auto& p : s.rate.probes)
      o +=
          " " + fmt(p.rate, "%.2f") + " req/s " + pct(p.within_budget) + (p.pass ? " ok;" : " no;");
    o += "\n";
  }

  o += "\n## Plots\n\n![latency CDF](latency_cdf.svg)\n\n![latency](latency.svg)\n\n"
       "![goodput](goodput.svg)\n\n![memory](memory.svg)\n\n![accuracy](accuracy.svg)\n";
  if (!r.sample_prompt.empty()) {
    o += "\n## A sample request to the last stage\n\n`POST /v1/completions` (the `/v1/intent` "
         "route does not exist yet), prompt `" +
         r.sample_prompt.substr(0, r.sample_prompt.size() - 1) + "\\n`:\n\n```\n" +
         r.sample_answer + "\n```\n";
  }
  if (!r.notes.empty()) {
    o += "\n## Notes\n\n";
    for (const auto& n : r.notes) o += "- " + n + "\n";
  }
  return o;
}

nlohmann::json render_json(const Report& r) {
  nlohmann::json j = {{"command", r.command},
                      {"machine", r.machine},
                      {"data_dir", r.data_dir},
                      {"teacher", r.teacher_origin},
                      {"budget_ms", r.budget_ms},
                      {"target", r.target},
                      {"burstiness", r.burstiness},
                      {"common_rate", num(r.common_rate)},
                      {"test_requests", r.test_requests},
                      {"max_tokens", r.max_tokens},
                      {"wall_s", r.wall_s},
                      {"notes", r.notes},
                      {"sample", {{"prompt", r.sample_prompt}, {"answer", r.sample_answer}}}};
  const StageResult* b = baseline(r);
  auto& stages = j["stages"] = nlohmann::json::array();
  for (const auto& s : r.stages) {
    nlohmann::json st = {
        {"id", s.stage.id}, {"name", s.stage.name}, {"available", s.stage.available}};
    if (!s.stage.available) {
      st["reason"] = s.stage.reason;
      stages.push_back(st);
      continue;
    }
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& p : s.rate.probes)
      probes.push_back({{"rate", p.rate}, {"within_budget", p.within_budget}, {"pass", p.pass}});
    st.update({{"model", s.model_path},
               {"serving_options", s.options},
               {"serve_argv", s.serve_argv},
               {"changes", s.changes},
               {"p50_ms", num(s.p50_ms)},
               {"p99_ms", num(s.p99_ms)},
               {"c1_failed", s.c1_failed},
               {"max_rate_within_budget", s.rate.best_rate},
               {"probes", probes},
               {"queue_wait_p99_ms", num(s.queue_wait_p99_ms)},
               {"timeout_rate", num(s.timeout_rate)},
               {"common_rate_within_budget", num(s.common_within_budget)},
               {"weight_bytes", s.weight_bytes},
               {"kv_bytes", s.kv_bytes},
               {"peak_rss_bytes", s.peak_rss_bytes},
               {"model_file_bytes", s.model_file_bytes},
               {"intent_accuracy", num(s.clean.intent)},
               {"slot_f1", num(s.clean.slot_f1)},
               {"noisy_intent_accuracy", num(s.noisy.intent)},
               {"noisy_slot_f1", num(s.noisy.slot_f1)}});
    if (b) {
      st["ratio_to_stage0"] = {
          {"p50", num(s.p50_ms / b->p50_ms)},
          {"p99", num(s.p99_ms / b->p99_ms)},
          {"max_rate", num(b->rate.best_rate > 0 ? s.rate.best_rate / b->rate.best_rate : NAN)},
          {"weight_bytes", num(double(s.weight_bytes) / double(b->weight_bytes))},
          {"kv_bytes", num(double(s.kv_bytes) / double(b->kv_bytes))},
          {"peak_rss", num(double(s.peak_rss_bytes) / double(b->peak_rss_bytes))}};
    }
    stages.push_back(st);
  }
  return j;
}

std::map<std::string, std::string> render_plots(const Report& r) {
  std::vector<std::string> cats;
  BarSeries p50{"P50", {}}, p99{"P99", {}}, rate{"max req/s within budget", {}};
  BarSeries w{"weights", {}}, kv{"KV cache", {}}, rss{"peak RSS", {}};
  BarSeries ic{"intent (clean)", {}}, in{"intent (noisy)", {}}, fc{"slot F1 (clean)", {}},
      fn{"slot F1 (noisy)", {}};
  std::vector<std::pair<std::string, std::vector<double>>> cdf;
  for (const auto& s : r.stages) {
    if (!s.stage.available) continue;
    cats.push_back(label(s));
    p50.values.push_back(s.p50_ms);
    p99.values.push_back(s.p99_ms);
    rate.values.push_back(s.rate.best_rate);
    w.values.push_back(s.weight_bytes < 0 ? NAN : double(s.weight_bytes) / 1e6);
    kv.values.push_back(s.kv_bytes < 0 ? NAN : double(s.kv_bytes) / 1e6);
    rss.values.push_back(s.peak_rss_bytes < 0 ? NAN : double(s.peak_rss_bytes) / 1e6);
    ic.values.push_back(100 * s.clean.intent);
    in.values.push_back(100 * s.noisy.intent);
    fc.values.push_back(100 * s.clean.slot_f1);
    fn.values.push_back(100 * s.noisy.slot_f1);
    cdf.push_back({label(s), s.e2e_ms});
  }
  return {
      {"latency_cdf.svg", svg_cdfs("End-to-end latency at concurrency 1", "ms", cdf)},
      {"latency.svg", svg_bars("End-to-end latency at concurrency 1", "ms", cats, {p50, p99})},
      {"goodput.svg", svg_bars("Highest arrival rate with " + fmt(100 * r.target, "%g") +
                                   "% within " + fmt(r.budget_ms, "%g") + " ms",
                               "requests/s", cats, {rate})},
      {"memory.svg", svg_bars("Memory", "MB", cats, {w, kv, rss})},
      {"accuracy.svg", svg_bars("Task accuracy", "%", cats, {ic, in, fc, fn})},
  };
}

}  // namespace shrike::optimize
