#include "optimize/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

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

// The measured stage just before the first speculative one: what speculation is compared with.
const StageResult* before_speculation(const Report& r) {
  const StageResult* prev = nullptr;
  for (const auto& s : r.stages) {
    if (s.stage.speculative) return prev;
    if (s.stage.available) prev = &s;
  }
  return nullptr;
}

// Each speculative decoding kind on the first speculative stage's options, against the stage
// before it (what each kind bought), and the acceptance every speculative stage saw.
std::string render_speculation(const Report& r) {
  if (r.spec_variants.empty()) return "";
  const StageResult* before = before_speculation(r);
  const std::string ref = before ? label(*before) : std::string("the previous stage");
  std::string o =
      "\n## Speculative decoding: what each kind bought\n\nEach kind served with the first "
      "speculative stage's options and measured at concurrency 1 on the same requests; the "
      "speculative stages serve the draft only when its P50 is more than 2% below prompt "
      "lookup's (it costs a second model), else prompt lookup. Acceptance: accepted / proposed "
      "draft tokens (the server's counters).\n\n";
  o += "| kind | P50 ms (c=1) | P50 vs " + ref + " | P99 ms (c=1) | acceptance | accepted tokens " +
       "per verification | served |\n|---|---:|---:|---:|---:|---:|---|\n";
  for (const auto& v : r.spec_variants)
    o += std::string("| ") + spec_kind_name(v.kind) +
         (v.draft.empty() ? "" : " (" + v.draft + ")") + " | " + fmt(v.p50_ms) + " | " +
         (before ? ratio(v.p50_ms, before->p50_ms) : "–") + " | " + fmt(v.p99_ms) + " | " +
         pct(v.acceptance) + " | " + fmt(v.accepted_per_step, "%.2f") + " | " +
         (v.chosen ? "yes" : "no") + " |\n";
  std::string seen;
  for (const auto& s : r.stages)
    if (s.stage.available && s.stage.speculative)
      seen += (seen.empty() ? "" : "; ") + label(s) + " " + pct(s.spec_acceptance) + " (" +
              fmt(s.spec_accepted_per_step, "%.2f") + " per verification)";
  if (!seen.empty()) o += "\nAcceptance in the stages' own concurrency-1 runs: " + seen + ".\n";
  return o;
}

nlohmann::json breakdown_json(const LatencyBreakdown& b) {
  return {{"e2e_mean_ms", num(b.e2e_ms)},         {"queue_wait_mean_ms", num(b.queue_ms)},
          {"prefill_mean_ms", num(b.prefill_ms)}, {"decode_mean_ms", num(b.decode_ms)},
          {"model_steps_mean", num(b.steps)},     {"step_ms", num(b.step_ms)}};
}

std::string breakdown_row(const std::string& name, double p50, const LatencyBreakdown& b) {
  return "| " + name + " | " + fmt(p50) + " | " + fmt(b.e2e_ms) + " | " + fmt(b.queue_ms) + " | " +
         fmt(b.prefill_ms) + " | " + fmt(b.decode_ms) + " | " + fmt(b.steps) + " | " +
         fmt(b.step_ms, "%.2f") + " |\n";
}

// Each stage's concurrency-1 latency split into what its lever can change: the wait to be
// scheduled (static batching's window), the prompt, and the answer's model steps x step time.
std::string render_breakdown(const Report& r) {
  std::string o =
      "\n## Where the time goes (concurrency 1, means per request)\n\nFrom the server's "
      "histograms over each stage's concurrency-1 run: wait = submitted to first scheduled "
      "(static batching waits up to its window for a batch to fill); prompt = time to first "
      "token after the wait; answer = the rest, model steps x step time (a speculative step "
      "verifies several tokens).\n\n| stage | P50 ms | mean ms | wait ms | prompt ms | answer ms "
      "| model steps | step ms |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  bool any = false;
  for (const auto& s : r.stages) {
    if (!s.stage.available) continue;
    o += breakdown_row(label(s), s.p50_ms, s.breakdown);
    any = true;
  }
  if (!any) return "";
  if (std::isfinite(r.stage0_no_window_p50_ms))
    o += breakdown_row(
        "stage 0 without its " + fmt(r.stage0_batch_wait_ms, "%g") + " ms batch window",
        r.stage0_no_window_p50_ms, r.stage0_no_window);
  return o;
}

const StageResult* last_measured(const Report& r) {
  const StageResult* last = nullptr;
  for (const auto& s : r.stages)
    if (s.stage.available) last = &s;
  return last;
}

std::vector<const StageResult*> measured(const Report& r) {
  std::vector<const StageResult*> v;
  for (const auto& s : r.stages)
    if (s.stage.available) v.push_back(&s);
  return v;
}

// The highest rate within the budget as shown: "none" when no probed rate passed, ">= R" when the
// search stopped at its upper bound (the capacity may be higher).
std::string rate_text(const RateSearchResult& r) {
  if (r.best_rate <= 0) return "none";
  return (r.lower_bound ? ">= " : "") + fmt(r.best_rate, "%.2f");
}

std::string option_or(const StageResult& s, const std::string& key, const std::string& dflt) {
  const auto it = s.options.find(key);
  return it == s.options.end() ? dflt : it->second;
}

std::string what_changed(const StageResult& s) {
  std::string c;
  for (const auto& ch : s.changes) c += (c.empty() ? "" : "; ") + ch;
  return label(s) + " (" + s.stage.name + (c.empty() ? "" : ": " + c) + ")";
}

// "0 a, 1 b, ...": a value of every measured stage.
std::string chain(const Report& r, const std::function<std::string(const StageResult&)>& shown) {
  std::string c;
  for (const auto& s : r.stages)
    if (s.stage.available)
      c += (c.empty() ? "" : ", ") + std::to_string(s.stage.id) + " " + shown(s);
  return c;
}

// The step between consecutive measured stages that moved `value` most in the bad direction
// (down when higher is better), as "stage k (its changes) took it from a to b".
std::string worst_step(const Report& r, const std::function<double(const StageResult&)>& value,
                       bool higher_is_better, const char* f) {
  const auto m = measured(r);
  const StageResult* worst = nullptr;
  double worst_loss = 0, from = NAN, to = NAN;
  for (size_t i = 1; i < m.size(); ++i) {
    const double a = value(*m[i - 1]), b = value(*m[i]);
    const double loss = higher_is_better ? a - b : b - a;
    if (std::isfinite(loss) && loss > worst_loss) worst = m[i], worst_loss = loss, from = a, to = b;
  }
  if (!worst) return "no single stage made it worse than its predecessor";
  return what_changed(*worst) + " took it from " + fmt(from, f) + " to " + fmt(to, f);
}

TargetCheck latency_target(const Report& r, const StageResult& b, const StageResult& l) {
  TargetCheck t{"P50 at concurrency 1 at least " + fmt(kP50Target, "%g") +
                    "x lower than stage 0's (the seed: 450 -> 40 ms)",
                fmt(b.p50_ms) + " ms", fmt(l.p50_ms) + " ms", "", ""};
  if (!std::isfinite(b.p50_ms) || !std::isfinite(l.p50_ms) || l.p50_ms <= 0) {
    t.verdict = "not measured";
    return t;
  }
  const double x = b.p50_ms / l.p50_ms;
  t.verdict = x >= kP50Target ? "met" : "missed";
  t.last += " (" + fmt(x, "%.1f") + "x lower)";
  if (x < kP50Target)
    t.why = label(l) + " is only " + fmt(x, "%.2f") + "x faster; the worst step: " +
            worst_step(
                r, [](const StageResult& s) { return s.p50_ms; }, false, "%.1f ms");
  return t;
}

std::string breakdown_text(const StageResult& s) {
  const LatencyBreakdown& b = s.breakdown;
  return "wait " + fmt(b.queue_ms) + " + prompt " + fmt(b.prefill_ms) + " + answer " +
         fmt(b.decode_ms) + " ms (" + fmt(b.steps) + " steps x " + fmt(b.step_ms, "%.2f") + " ms)";
}

// A lever's own row: its P50 at concurrency 1 against the stage before it (the seed's stages
// each cut latency: 450 -> 280 -> 130 -> 80 ms). Missed: both stages' breakdowns say where the
// time went, so the reader sees what the lever did change.
TargetCheck step_target(const StageResult& before, const StageResult& s) {
  TargetCheck t{"stage " + std::to_string(s.stage.id) + " (" + s.stage.name + "): P50 at least " +
                    fmt(kStepP50Target, "%g") + "x lower than stage " +
                    std::to_string(before.stage.id) + "'s",
                "stage " + std::to_string(before.stage.id) + ": " + fmt(before.p50_ms) + " ms",
                "stage " + std::to_string(s.stage.id) + ": " + fmt(s.p50_ms) + " ms", "", ""};
  if (!std::isfinite(before.p50_ms) || !std::isfinite(s.p50_ms) || s.p50_ms <= 0) {
    t.verdict = "not measured";
    return t;
  }
  const double x = before.p50_ms / s.p50_ms;
  t.last += " (" + fmt(x, "%.2f") + "x)";
  t.verdict = x >= kStepP50Target ? "met" : "missed";
  if (x < kStepP50Target)
    t.why = "stage " + std::to_string(before.stage.id) + ": " + breakdown_text(before) +
            "; stage " + std::to_string(s.stage.id) + ": " + breakdown_text(s);
  return t;
}

TargetCheck rate_target(const Report& r, const StageResult& b, const StageResult& l) {
  TargetCheck t{"highest rate with " + pct(r.target) + " within " + fmt(r.budget_ms, "%g") +
                    " ms at least 15x stage 0's",
                rate_text(b.rate) + " req/s", rate_text(l.rate) + " req/s", "", ""};
  // Stages that met the budget at no probed rate, with their batching mode (the usual reason).
  std::string none;
  for (const StageResult* s : measured(r))
    if (s != &b && s->rate.best_rate <= 0)
      none += (none.empty() ? "" : ", ") + std::to_string(s->stage.id) + " (batching " +
              option_or(*s, "batching", "?") + ")";
  if (b.rate.best_rate <= 0) {
    t.verdict = "not defined";
    double lo = INFINITY, hi = 0, best = 0;
    for (const auto& p : b.rate.probes) {
      lo = std::min(lo, p.rate), hi = std::max(hi, p.rate), best = std::max(best, p.within_budget);
    }
    t.why = "stage 0 met the budget at no probed rate (" + std::to_string(b.rate.probes.size()) +
            " rates from " + fmt(lo, "%.2f") + " to " + fmt(hi, "%.2f") + " req/s, " +
            std::to_string(b.rate.runs()) + " runs; at best a median of " + pct(best) +
            " of requests within " + fmt(r.budget_ms, "%g") + " ms";
    if (option_or(b, "batching", "") == "static")
      t.why += "; its static batches hold a request up to " + option_or(b, "batch_wait_ms", "?") +
               " ms for the batch to fill, and its P50 at concurrency 1 is already " +
               fmt(b.p50_ms) + " ms of the " + fmt(r.budget_ms, "%g") + " ms";
    t.why += "), so there is no rate to multiply: the ratio is not defined";
    if (l.rate.best_rate > 0)
      t.why += "; " + label(l) + " sustains " + rate_text(l.rate) + " req/s";
    else
      t.why += "; " + label(l) + " met it at no probed rate either";
    if (!none.empty()) t.why += "; stages that met it at no probed rate either: " + none;
    return t;
  }
  if (l.rate.best_rate <= 0) {
    t.verdict = "missed";
    t.why = label(l) + " met the budget at no probed rate; stages that fell short: " + none;
    return t;
  }
  // A lower bound on stage 0 makes x an upper bound of the true ratio; one on the last stage
  // makes it a lower bound; with both, x decides nothing.
  const double x = l.rate.best_rate / b.rate.best_rate;
  const bool x_low = l.rate.lower_bound && !b.rate.lower_bound;
  const bool x_high = b.rate.lower_bound && !l.rate.lower_bound;
  const bool both = b.rate.lower_bound && l.rate.lower_bound;
  t.last += " (" +
            std::string(x_low    ? ">= "
                        : x_high ? "<= "
                        : both   ? "~"
                                 : "") +
            fmt(x, "%.1f") + "x)";
  const std::string per_stage =
      "per stage: " + chain(r, [](const StageResult& s) { return rate_text(s.rate); });
  if (x >= 15 && !x_high && !both) {
    t.verdict = "met";
  } else if (x < 15 && !x_low && !both) {
    t.verdict = "missed";
    t.why = label(l) + " sustains " + (x_high ? "at most " : "") + fmt(x, "%.2f") +
            "x stage 0's rate (" + per_stage + " req/s)";
    if (b.rate.lower_bound)
      t.why += "; stage 0 passed every rate it was probed at, so its capacity is higher still";
    // The usual reason on a small model: static batches fill fast at high rates, so the naive
    // service's batch wait costs latency (the P50 target) rather than throughput.
    const double batch = std::atof(option_or(b, "batch_size", "0").c_str());
    const double wait = std::atof(option_or(b, "batch_wait_ms", "0").c_str());
    if (option_or(b, "batching", "") == "static" && batch > 0 && wait > 0) {
      const double fill_ms = 1000 * batch / b.rate.best_rate;
      if (fill_ms < wait)
        t.why += "; at " + fmt(b.rate.best_rate, "%.2f") + " req/s stage 0's static batches of " +
                 fmt(batch, "%g") + " fill in ~" + fmt(fill_ms, "%.0f") +
                 " ms on average, inside its " + fmt(wait, "%g") +
                 " ms batch wait, so its batching costs latency (P50 " + fmt(b.p50_ms) +
                 " ms at concurrency 1) more than throughput";
    }
  } else {
    t.verdict = "not decided";
    t.why = std::string("the rate search found no failing rate above ") +
            (both    ? "either stage's"
             : x_low ? label(l) + "'s"
                     : "stage 0's") +
            " highest passing rate within its probes and bound, so the ratio is only a bound (" +
            per_stage + " req/s); more probes (--probes) or a higher --max-rate decide it";
  }
  return t;
}

TargetCheck score_target(const Report& r, const StageResult& b, const StageResult& l,
                         const std::string& what, double points, double TaskScores::*field,
                         bool noisy) {
  auto v = [&](const StageResult& s) { return (noisy ? s.noisy : s.clean).*field; };
  TargetCheck t{what + (noisy ? " (noisy test)" : " (clean test)") + " within " +
                    fmt(points, "%g") + " point" + (points == 1 ? "" : "s") + " of stage 0's",
                pct(v(b)), pct(v(l)), "", ""};
  const double delta = 100 * (v(l) - v(b));
  if (!std::isfinite(delta)) {
    t.verdict = "not measured";
    return t;
  }
  t.last += " (" + fmt(delta, "%+.1f") + " points)";
  // Within: no worse by more than the tolerance (a gain is within).
  t.verdict = delta >= -points - 1e-9 ? "met" : "missed";
  if (t.verdict == "missed")
    t.why = "the worst step: " +
            worst_step(
                r, [&](const StageResult& s) { return 100 * v(s); }, true, "%.1f%%");
  return t;
}

}  // namespace

std::vector<TargetCheck> check_targets(const Report& r) {
  const StageResult* b = baseline(r);
  const StageResult* l = last_measured(r);
  if (!b || !l || b == l) return {};
  std::vector<TargetCheck> t = {latency_target(r, *b, *l), rate_target(r, *b, *l)};
  for (bool noisy : {false, true}) {
    t.push_back(score_target(r, *b, *l, "intent accuracy", 0.5, &TaskScores::intent, noisy));
    t.push_back(score_target(r, *b, *l, "slot F1", 1, &TaskScores::slot_f1, noisy));
  }
  // The levers that cut per-request latency in the seed; stage 4 (continuous batching) is
  // measured by throughput and by the batch window it removes, not by a step of its own.
  const auto m = measured(r);
  for (size_t i = 1; i < m.size(); ++i)
    if (m[i]->stage.id != 4) t.push_back(step_target(*m[i - 1], *m[i]));
  return t;
}

std::string render_markdown(const Report& r) {
  std::string o = "# shrike optimize: the staged report\n\n";
  o += "- command: `" + r.command + "`\n";
  o += "- machine: " + r.machine + "\n";
  o += "- held-out requests: the " + std::to_string(r.test_requests) + " utterances of " +
       r.data_dir + "/test.jsonl in order, as the task prompt, greedy, max_tokens " +
       std::to_string(r.max_tokens) + "\n";
  o += "- teacher: " + r.teacher_origin + "\n";
  if (r.vocab_before > 0)
    o += "- vocabulary: " + std::to_string(r.vocab_before) + " tokens, " +
         std::to_string(r.vocab_after) + " after `shrike trim-vocab` to the task's texts\n";
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
         fmt(s.p99_ms) + " | " + rate_text(s.rate) + " | " + fmt(s.queue_wait_p99_ms, "%.0f") +
         " | " + pct(s.timeout_rate) + " | " + mb(s.weight_bytes) + " | " + mb(s.kv_bytes) + " | " +
         mb(s.peak_rss_bytes) + " | " + pct(s.clean.intent) + " / " + pct(s.noisy.intent) + " | " +
         pct(s.clean.slot_f1) + " / " + pct(s.noisy.slot_f1) + " |\n";
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
           ratio(s.p99_ms, b->p99_ms) + " | " +
           (b->rate.best_rate > 0 ? ratio(s.rate.best_rate, b->rate.best_rate)
                                  : std::string("not defined")) +
           " | " + ratio(double(s.weight_bytes), double(b->weight_bytes)) + " | " +
           ratio(double(s.kv_bytes), double(b->kv_bytes)) + " | " +
           ratio(double(s.peak_rss_bytes), double(b->peak_rss_bytes)) + " | " +
           ratio(s.noisy.intent, b->noisy.intent) + " |\n";
    }
    if (b->rate.best_rate <= 0)
      o += "\nmax req/s: not defined, stage 0 met the budget at no probed rate (see Targets).\n";
  }

  if (const auto targets = check_targets(r); !targets.empty()) {
    const StageResult* l = last_measured(r);
    o += "\n## Targets\n\nThe last measured stage (" + label(*l) +
         ") against stage 0, then each latency lever against the stage before it.\n\n";
    o += "| target | stage 0 | " + label(*l) + " | verdict |\n|---|---:|---:|---|\n";
    for (const auto& t : targets)
      o += "| " + t.target + " | " + t.stage0 + " | " + t.last + " | " + t.verdict + " |\n";
    std::string whys;
    for (const auto& t : targets)
      if (!t.why.empty()) whys += "- " + t.target + ": **" + t.verdict + "**: " + t.why + ".\n";
    if (!whys.empty()) o += "\nWhere a target is not met:\n\n" + whys;
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

  o += render_breakdown(r);
  o += render_speculation(r);

  o += "\n## Rate search\n\nEach probe replays the test prompts in order with gamma arrivals; it "
       "passes when " +
       pct(r.target) + " of its requests finish within " + fmt(r.budget_ms, "%g") +
       " ms. Each rate is run up to " + std::to_string(r.probe_repeats) +
       " times (run k with seed k: the same arrival patterns for every stage) and passes when a "
       "majority of its runs do; shown: each run's fraction within the budget, then the "
       "verdict.\n\n";
  for (const auto& s : r.stages) {
    if (!s.stage.available) continue;
    o += "- stage " + std::to_string(s.stage.id) + ":";
    for (const auto& p : s.rate.probes) {
      o += " " + fmt(p.rate, "%.2f") + " req/s";
      for (size_t i = 0; i < p.runs.size(); ++i) o += (i ? " / " : " ") + pct(p.runs[i]);
      o += p.pass ? " ok;" : " no;";
    }
    o += " highest passing: " + rate_text(s.rate) + "\n";
  }

  o += "\n## Plots\n\n![latency CDF](latency_cdf.svg)\n\n![latency](latency.svg)\n\n"
       "![goodput](goodput.svg)\n\n![memory](memory.svg)\n\n![accuracy](accuracy.svg)\n";
  if (!r.sample_prompt.empty()) {
    o += "\n## A sample request to the last stage\n\n`POST /v1/completions` (`POST /v1/intent` "
         "with the utterance answers the same), prompt (as a JSON string) `" +
         nlohmann::json(r.sample_prompt).dump() + "`:\n\n```\n" + r.sample_answer + "\n```\n";
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
                      {"vocab_before_trim", r.vocab_before},
                      {"vocab_after_trim", r.vocab_after},
                      {"budget_ms", r.budget_ms},
                      {"target", r.target},
                      {"burstiness", r.burstiness},
                      {"common_rate", num(r.common_rate)},
                      {"test_requests", r.test_requests},
                      {"probe_repeats", r.probe_repeats},
                      {"max_tokens", r.max_tokens},
                      {"wall_s", r.wall_s},
                      {"notes", r.notes},
                      {"targets", nlohmann::json::array()},
                      {"sample", {{"prompt", r.sample_prompt}, {"answer", r.sample_answer}}}};
  for (const auto& t : check_targets(r))
    j["targets"].push_back({{"target", t.target},
                            {"stage0", t.stage0},
                            {"last_stage", t.last},
                            {"verdict", t.verdict},
                            {"why", t.why}});
  j["stage0_without_batch_window"] = {{"batch_wait_ms", num(r.stage0_batch_wait_ms)},
                                      {"p50_ms", num(r.stage0_no_window_p50_ms)},
                                      {"p99_ms", num(r.stage0_no_window_p99_ms)},
                                      {"breakdown", breakdown_json(r.stage0_no_window)}};
  auto& spec = j["speculation"] = nlohmann::json::array();
  const StageResult* before = before_speculation(r);
  for (const auto& v : r.spec_variants)
    spec.push_back({{"kind", v.kind == SpecKind::Draft ? "draft" : "ngram"},
                    {"draft", v.draft},
                    {"p50_ms", num(v.p50_ms)},
                    {"p99_ms", num(v.p99_ms)},
                    {"p50_ratio_to_previous_stage", num(before ? v.p50_ms / before->p50_ms : NAN)},
                    {"acceptance", num(v.acceptance)},
                    {"accepted_per_step", num(v.accepted_per_step)},
                    {"chosen", v.chosen},
                    {"serve_command", v.serve_command}});
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
      probes.push_back({{"rate", p.rate},
                        {"runs", p.runs},
                        {"within_budget_median", p.within_budget},
                        {"pass", p.pass}});
    st.update({{"model", s.model_path},
               {"serving_options", s.options},
               {"serve_argv", s.serve_argv},
               {"changes", s.changes},
               {"p50_ms", num(s.p50_ms)},
               {"p99_ms", num(s.p99_ms)},
               {"c1_failed", s.c1_failed},
               {"max_rate_within_budget", s.rate.best_rate},
               {"max_rate_is_lower_bound", s.rate.lower_bound},
               {"rate_search_runs", s.rate.runs()},
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
               {"noisy_slot_f1", num(s.noisy.slot_f1)},
               {"speculative", s.stage.speculative},
               {"spec_acceptance", num(s.spec_acceptance)},
               {"spec_accepted_per_step", num(s.spec_accepted_per_step)},
               {"breakdown", breakdown_json(s.breakdown)}});
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
