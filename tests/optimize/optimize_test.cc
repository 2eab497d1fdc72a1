// The pure parts of `shrike optimize`: stage table and option diffs, the artefact cache, the rate
// search (on a fake server), histogram quantiles, report rendering, and the child-process runner.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "optimize/artefact_cache.h"
#include "optimize/builds.h"
#include "optimize/process.h"
#include "optimize/rate_search.h"
#include "optimize/report.h"
#include "optimize/served.h"
#include "optimize/stages.h"

namespace fs = std::filesystem;
using namespace shrike::optimize;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("shrike_opt_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

}  // namespace

TEST(Stages, TableMarksUnavailableStagesAndChangesOneThingAtATime) {
  const auto stages = default_stages(4);
  ASSERT_EQ(stages.size(), 6u);
  for (size_t i = 0; i < stages.size(); ++i) EXPECT_EQ(stages[i].id, int(i));
  for (const auto& st : stages) EXPECT_TRUE(st.available) << st.id;
  // Stage 1 changes the KV type (and the model); stage 2 only the model.
  EXPECT_EQ(stages[0].model, StageModel::Teacher);
  EXPECT_EQ(stages[1].model, StageModel::TeacherInt8);
  EXPECT_EQ(stages[1].serve_args[7], "int8-mixed");
  EXPECT_EQ(stages[0].serve_args[7], "f32");
  EXPECT_EQ(stages[1].serve_args, stages[2].serve_args);
  EXPECT_NE(stages[1].model, stages[2].model);
  // Stage 4: same model, continuous batching with the prefix cache left on.
  EXPECT_EQ(stages[4].model, stages[2].model);
  const auto& a = stages[4].serve_args;
  EXPECT_NE(std::find(a.begin(), a.end(), "continuous"), a.end());
  EXPECT_EQ(std::find(a.begin(), a.end(), "--no-prefix-cache"), a.end());
  // Stage 3 adds speculation to stage 2 and nothing else (the pipeline adds the kind it measured
  // faster); stages 4 and 5 keep it.
  EXPECT_EQ(stages[3].serve_args, stages[2].serve_args);
  EXPECT_EQ(stages[3].model, stages[2].model);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(stages[size_t(i)].speculative, i >= 3) << i;
  EXPECT_EQ(std::find(a.begin(), a.end(), "--spec"), a.end());
  // Stages 0-4 answer free-form; stage 5 only drops that (the schema, with jump-forward).
  for (int i = 0; i < 5; ++i) {
    const auto& args = stages[size_t(i)].serve_args;
    EXPECT_NE(std::find(args.begin(), args.end(), "--no-task-schema"), args.end()) << i;
    EXPECT_FALSE(stages[size_t(i)].task_schema) << i;
  }
  std::vector<std::string> five = stages[5].serve_args;
  five.push_back("--no-task-schema");
  std::vector<std::string> four = stages[4].serve_args;
  std::sort(five.begin(), five.end());
  std::sort(four.begin(), four.end());
  EXPECT_EQ(five, four);
  EXPECT_TRUE(stages[5].task_schema);
  // Stage 5's model is stage 4's with its vocabulary trimmed (when that is worth it).
  EXPECT_EQ(stages[5].model, StageModel::StudentInt8Trimmed);
}

TEST(Stages, TrimmingIsWorthAStageFromTenPercentFewerTokens) {
  EXPECT_TRUE(trim_worthwhile(32000, 1200));
  EXPECT_TRUE(trim_worthwhile(1000, 900));
  EXPECT_FALSE(trim_worthwhile(1000, 901));
  EXPECT_FALSE(trim_worthwhile(2890, 2886));  // the demo's own task BPE
  EXPECT_FALSE(trim_worthwhile(1000, 0));     // nothing kept: something went wrong
}

TEST(Stages, OptionDiffListsChangedAddedRemovedAndSkipsIgnored) {
  const std::map<std::string, std::string> a = {
      {"batching", "static"}, {"batch_size", "8"}, {"kv_type", "f32"}, {"weight_bytes", "100"}};
  const std::map<std::string, std::string> b = {{"batching", "continuous"},
                                                {"kv_type", "f32"},
                                                {"prefix_cache", "on"},
                                                {"weight_bytes", "50"}};
  const auto d = option_diff(a, b, {"weight_bytes"});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], "batch_size: removed (was 8)");
  EXPECT_EQ(d[1], "batching: static -> continuous");
  EXPECT_EQ(d[2], "prefix_cache: on (added)");
  EXPECT_TRUE(option_diff(a, a).empty());
  EXPECT_EQ(option_diff(a, b).size(), 4u);  // weight_bytes counts when not ignored
}

// Depth and width pruning reach `shrike prune` when asked, and a run without them keeps the
// recipe (so the cache key) it had before they existed.
TEST(Builds, PruningStepCarriesDepthAndWidthOnlyWhenAsked) {
  auto prune_args = [](const OptimizeOptions& o) {
    Models m;
    for (const BuildStep& s : model_builds(o, "D", "C", m))
      if (s.what == "pruned") return s.args();
    return std::vector<std::string>{};
  };
  OptimizeOptions o;
  o.out_dir = "OUT";  // no teacher given: the teacher is trained here (nothing is opened)
  const std::vector<std::string> plain = prune_args(o);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "--layers"), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "--hidden"), 0);
  o.prune_layers = 2;
  o.prune_hidden = 0.25;
  const std::vector<std::string> deep = prune_args(o);
  const auto layers = std::find(deep.begin(), deep.end(), "--layers");
  const auto hidden = std::find(deep.begin(), deep.end(), "--hidden");
  ASSERT_NE(layers, deep.end());
  ASSERT_NE(hidden, deep.end());
  EXPECT_EQ(*(layers + 1), "2");
  EXPECT_EQ(std::stod(*(hidden + 1)), 0.25);
}

TEST(ArtefactCache, FreshOnlyForTheSameRecipeInputsAndAnExistingFile) {
  const fs::path d = temp_dir("cache");
  const std::string in = (d / "in.txt").string(), art = (d / "model.gguf").string(),
                    manifest = (d / "manifest.json").string();
  write(in, "abc");
  const std::string key = artefact_key({"train", "--epochs", "2"}, {in});
  EXPECT_EQ(key, artefact_key({"train", "--epochs", "2"}, {in}));
  EXPECT_NE(key, artefact_key({"train", "--epochs", "3"}, {in}));
  EXPECT_NE(key, artefact_key({"train", "--epochs2"}, {in}));  // argument boundaries count
  {
    ArtefactCache c(manifest);
    EXPECT_FALSE(c.fresh(art, key));
    write(art, "model");
    c.record(art, key);
    EXPECT_TRUE(c.fresh(art, key));
  }
  ArtefactCache again(manifest);  // the manifest persists
  EXPECT_TRUE(again.fresh(art, key));
  write(in, "abd");  // an input's contents change: a new key
  EXPECT_FALSE(again.fresh(art, artefact_key({"train", "--epochs", "2"}, {in})));
  fs::remove(art);  // the artefact is gone: not fresh whatever the manifest says
  EXPECT_FALSE(again.fresh(art, key));
  write(art, "model");
  again.forget(art);
  EXPECT_FALSE(ArtefactCache(manifest).fresh(art, key));
  write(manifest, "{not json");  // a damaged manifest rebuilds everything, no throw
  EXPECT_FALSE(ArtefactCache(manifest).fresh(art, key));
  EXPECT_THROW(file_hash((d / "missing").string()), std::exception);
  fs::remove_all(d);
}

TEST(RateSearch, BracketsAndBisectsTowardsTheCapacity) {
  // A fake server: everything within budget up to 7.3 req/s, then quickly worse.
  int calls = 0;
  auto measure = [&](double rate, int) {
    ++calls;
    return rate <= 7.3 ? 1.0 : 0.9;
  };
  RateSearchOptions o;
  o.start_rate = 2;
  o.max_probes = 8;
  const auto r = search_rate(o, measure);
  EXPECT_EQ(calls, r.runs());
  // A consistent server: every rate decided by 2 agreeing runs of 3.
  for (const auto& p : r.probes) EXPECT_EQ(p.runs.size(), 2u) << p.rate;
  EXPECT_LE(int(r.probes.size()), 8);
  EXPECT_LE(r.best_rate, 7.3);
  EXPECT_GT(r.best_rate, 7.3 / 1.1 - 1e-9);  // bisected to within 10%
  EXPECT_FALSE(r.lower_bound);
  for (const auto& p : r.probes) EXPECT_EQ(p.pass, p.rate <= 7.3);
}

TEST(RateSearch, ARateNeedsAMajorityOfItsRuns) {
  // A noisy server: the first run at every rate has one slow request too many; the others pass
  // up to 10 req/s. One run per rate would find nothing; 2 of 3 finds the capacity.
  std::vector<std::pair<double, int>> seen;
  auto measure = [&](double rate, int run) {
    seen.push_back({rate, run});
    if (run == 0) return 0.95;
    return rate <= 10 ? 1.0 : 0.5;
  };
  RateSearchOptions o;
  o.start_rate = 4;
  o.max_probes = 6;
  const auto r = search_rate(o, measure);
  ASSERT_GE(r.probes.size(), 3u);
  EXPECT_DOUBLE_EQ(r.probes[0].rate, 4);
  EXPECT_TRUE(r.probes[0].pass);
  EXPECT_EQ(r.probes[0].runs, (std::vector<double>{0.95, 1.0, 1.0}));  // split: a third run
  EXPECT_DOUBLE_EQ(r.probes[0].within_budget, 1.0);                    // the median
  EXPECT_DOUBLE_EQ(r.probes[1].rate, 8);
  EXPECT_TRUE(r.probes[1].pass);
  EXPECT_DOUBLE_EQ(r.probes[2].rate, 16);
  EXPECT_FALSE(r.probes[2].pass);
  EXPECT_EQ(r.probes[2].runs.size(), 2u);  // two failures decide it
  EXPECT_LE(r.best_rate, 10);
  EXPECT_GT(r.best_rate, 8);
  EXPECT_EQ(int(seen.size()), r.runs());
  for (size_t i = 0; i < seen.size(); ++i)  // runs numbered from 0 at each rate
    if (i == 0 || seen[i].first != seen[i - 1].first) {
      EXPECT_EQ(seen[i].second, 0) << i;
    }

  // One run per rate: the same server looks like it sustains nothing.
  o.repeats = 1;
  const auto once = search_rate(o, measure);
  EXPECT_EQ(once.best_rate, 0);
  for (const auto& p : once.probes) EXPECT_EQ(p.runs.size(), 1u);
}

TEST(RateSearch, GoesDownFromATooHighStartAndRespectsBounds) {
  RateSearchOptions o;
  o.start_rate = 100;
  o.max_probes = 3;
  auto r = search_rate(o, [](double rate, int) { return rate <= 10 ? 1.0 : 0.0; });
  ASSERT_EQ(r.probes.size(), 3u);
  EXPECT_DOUBLE_EQ(r.probes[0].rate, 100);
  EXPECT_DOUBLE_EQ(r.probes[1].rate, 50);
  EXPECT_DOUBLE_EQ(r.probes[2].rate, 25);
  EXPECT_EQ(r.best_rate, 0);  // nothing passed within the probes
  // Never below min_rate, and it stops there instead of probing it again.
  o.min_rate = 1;
  o.start_rate = 2;
  o.max_probes = 10;
  r = search_rate(o, [](double, int) { return 0.5; });
  EXPECT_EQ(r.probes.size(), 2u);
  EXPECT_DOUBLE_EQ(r.probes.back().rate, 1);
  // Always passing: doubles up to max_rate and stops, saying the capacity may be higher.
  o.max_rate = 16;
  r = search_rate(o, [](double, int) { return 1.0; });
  EXPECT_DOUBLE_EQ(r.best_rate, 16);
  EXPECT_TRUE(r.lower_bound);
  EXPECT_EQ(r.probes.size(), 4u);  // 2, 4, 8, 16
}

TEST(RateSearch, GrowthFactorAndALowerBoundWhenNoRateFailed) {
  RateSearchOptions o;
  o.start_rate = 10;
  o.growth = 4;
  o.max_probes = 6;
  auto r = search_rate(o, [](double rate, int) { return rate <= 300 ? 1.0 : 0.0; });
  ASSERT_GE(r.probes.size(), 4u);
  EXPECT_DOUBLE_EQ(r.probes[1].rate, 40);
  EXPECT_DOUBLE_EQ(r.probes[2].rate, 160);
  EXPECT_DOUBLE_EQ(r.probes[3].rate, 640);
  EXPECT_FALSE(r.probes[3].pass);
  EXPECT_GT(r.best_rate, 160);  // bisected between 160 and 640
  EXPECT_LE(r.best_rate, 300);
  EXPECT_FALSE(r.lower_bound);
  // Every probe passed: the best rate is only a lower bound.
  o.max_probes = 3;
  r = search_rate(o, [](double, int) { return 1.0; });
  EXPECT_DOUBLE_EQ(r.best_rate, 160);
  EXPECT_TRUE(r.lower_bound);
}

TEST(RateSearch, MedianOfRuns) {
  EXPECT_DOUBLE_EQ(median_of({0.9}), 0.9);
  EXPECT_DOUBLE_EQ(median_of({1.0, 0.9}), 0.95);
  EXPECT_DOUBLE_EQ(median_of({1.0, 0.2, 0.9}), 0.9);
  EXPECT_THROW(median_of({}), std::invalid_argument);
}

TEST(Served, HistogramQuantileOfTheRequestsBetweenScrapes) {
  const std::string before =
      "shrike_queue_wait_seconds_bucket{le=\"0.001\"} 10\n"
      "shrike_queue_wait_seconds_bucket{le=\"0.01\"} 10\n"
      "shrike_queue_wait_seconds_bucket{le=\"0.1\"} 10\n"
      "shrike_queue_wait_seconds_bucket{le=\"+Inf\"} 10\n";
  const std::string after =
      "# HELP x\nshrike_queue_wait_seconds_bucket{le=\"0.001\"} 60\n"
      "shrike_queue_wait_seconds_bucket{le=\"0.01\"} 108\n"
      "shrike_queue_wait_seconds_bucket{le=\"0.1\"} 110\n"
      "shrike_queue_wait_seconds_bucket{le=\"+Inf\"} 110\n"
      "shrike_other_bucket{le=\"0.001\"} 1\n";
  // 100 new requests: 50 within 1 ms, 98 within 10 ms, all within 100 ms.
  EXPECT_DOUBLE_EQ(histogram_quantile(before, after, "shrike_queue_wait_seconds", 0.5), 0.001);
  EXPECT_DOUBLE_EQ(histogram_quantile(before, after, "shrike_queue_wait_seconds", 0.98), 0.01);
  EXPECT_DOUBLE_EQ(histogram_quantile(before, after, "shrike_queue_wait_seconds", 0.99), 0.1);
  EXPECT_DOUBLE_EQ(histogram_quantile("", after, "shrike_queue_wait_seconds", 0.5), 0.001);
  EXPECT_TRUE(std::isnan(histogram_quantile(after, after, "shrike_queue_wait_seconds", 0.99)));
  EXPECT_TRUE(std::isnan(histogram_quantile("", "", "shrike_queue_wait_seconds", 0.99)));
}

TEST(Served, MetricSumAddsEveryLabelSetOfThatMetricOnly) {
  const std::string text =
      "# HELP shrike_spec_accepted_tokens_total Draft tokens the target accepted.\n"
      "# TYPE shrike_spec_accepted_tokens_total counter\n"
      "shrike_spec_accepted_tokens_total{model=\"a\"} 30\n"
      "shrike_spec_accepted_tokens_total{model=\"b\"} 12\n"
      "shrike_spec_accepted_tokens_total_extra 1000\n"
      "shrike_spec_steps_total 7\n";
  EXPECT_DOUBLE_EQ(metric_sum(text, "shrike_spec_accepted_tokens_total"), 42);
  EXPECT_DOUBLE_EQ(metric_sum(text, "shrike_spec_steps_total"), 7);
  EXPECT_TRUE(std::isnan(metric_sum(text, "shrike_spec_proposed_tokens_total")));
}

TEST(Served, LatencyBreakdownIsTheMeansBetweenTwoScrapes) {
  auto scrape = [](int n, double e2e, double wait, double ttft, int steps) {
    const std::string m = "{model=\"a\"} ";
    return "shrike_request_latency_seconds_count" + m + std::to_string(n) +
           "\nshrike_request_latency_seconds_sum" + m + std::to_string(e2e) +
           "\nshrike_queue_wait_seconds_sum" + m + std::to_string(wait) +
           "\nshrike_time_to_first_token_seconds_sum" + m + std::to_string(ttft) +
           "\nshrike_engine_steps_total" + m + std::to_string(steps) + "\n";
  };
  // 4 requests between the scrapes: 0.4 s in all, 0.2 s waiting, 0.28 s to the first token,
  // 40 steps.
  const LatencyBreakdown b =
      latency_breakdown(scrape(2, 1.0, 0.5, 0.6, 100), scrape(6, 1.4, 0.7, 0.88, 140));
  EXPECT_NEAR(b.e2e_ms, 100, 1e-6);
  EXPECT_NEAR(b.queue_ms, 50, 1e-6);
  EXPECT_NEAR(b.prefill_ms, 20, 1e-6);
  EXPECT_NEAR(b.decode_ms, 30, 1e-6);
  EXPECT_NEAR(b.steps, 10, 1e-9);
  EXPECT_NEAR(b.step_ms, 30.0 / 9, 1e-6);
  // No earlier scrape counts as zero; no request in between gives nothing.
  EXPECT_NEAR(latency_breakdown("", scrape(2, 1.0, 0.5, 0.6, 100)).e2e_ms, 500, 1e-6);
  EXPECT_TRUE(std::isnan(latency_breakdown(scrape(2, 1, 1, 1, 1), scrape(2, 1, 1, 1, 1)).e2e_ms));
}

TEST(Served, PeakRssFromProcStatus) {
  EXPECT_EQ(parse_vm_hwm("Name:\tshrike\nVmPeak:\t 999 kB\nVmHWM:\t    2048 kB\n"), 2048 * 1024);
  EXPECT_EQ(parse_vm_hwm("Name:\tshrike\n"), -1);
}

TEST(Report, MarkdownShowsUnavailableStagesRatiosAndChanges) {
  Report r;
  r.command = "shrike optimize --data d -o o";
  r.common_rate = 4;
  StageResult s0, s3, s4;
  s0.stage = default_stages(8)[0];
  s0.p50_ms = 40, s0.p99_ms = 80, s0.rate.best_rate = 2;
  s0.weight_bytes = 4000000, s0.kv_bytes = 1000000, s0.peak_rss_bytes = 20000000;
  s0.clean = {0.9, 0.8};
  s0.noisy = {0.8, 0.7};
  s3.stage = default_stages(8)[3];
  s3.stage.available = false;  // as a stage whose feature is missing is shown
  s3.stage.reason = "speculative decoding switched off for this test";
  s4 = s0;
  s4.stage = default_stages(8)[4];
  s4.p50_ms = 10;
  s4.rate.best_rate = 8;
  s4.changes = {"batching: static -> continuous"};
  r.stages = {s0, s3, s4};
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("not available: speculative decoding"), std::string::npos);
  EXPECT_NE(md.find("| 4 | x0.25 | x1.00 | x4.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("`batching: static -> continuous`"), std::string::npos);
  EXPECT_NE(md.find("![latency CDF](latency_cdf.svg)"), std::string::npos);
  const auto j = render_json(r);
  ASSERT_EQ(j["stages"].size(), 3u);
  EXPECT_FALSE(j["stages"][1]["available"].get<bool>());
  EXPECT_DOUBLE_EQ(j["stages"][2]["ratio_to_stage0"]["max_rate"].get<double>(), 4.0);
  const auto plots = render_plots(r);
  ASSERT_EQ(plots.size(), 5u);
  for (const auto& [name, svg] : plots) {
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << name;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << name;
  }
  // Two measured stages: two bar groups labelled in the latency chart.
  EXPECT_NE(plots.at("latency.svg").find(">stage 4<"), std::string::npos);
  EXPECT_EQ(plots.at("latency.svg").find(">stage 3<"), std::string::npos);
}

TEST(Report, TargetsSayWhichStageFellShortAndWhy) {
  Report r;
  StageResult s0, s2, s4;
  s0.stage = default_stages(8)[0];
  s0.options = {{"batching", "static"}, {"batch_wait_ms", "50"}};
  s0.p50_ms = 62.9;
  s0.rate.probes = {{8, {0.979, 0.98}, 0.9795, false}, {4, {0.958, 0.95}, 0.954, false}};
  s0.clean = {0.998, 0.134};
  s0.noisy = {0.935, 0.113};
  s2 = s0;
  s2.stage = default_stages(8)[2];
  s2.changes = {"model_file: teacher-q8_0.gguf -> student-q8_0.gguf"};
  s2.noisy = {0.925, 0.20};  // the student loses a point of noisy intent
  s4 = s2;
  s4.stage = default_stages(8)[4];
  s4.options = {{"batching", "continuous"}};
  s4.changes = {"batching: static -> continuous"};
  s4.p50_ms = 1.2;
  s4.rate.best_rate = 857.62;
  r.stages = {s0, s2, s4};

  s2.breakdown = {62.0, 50.1, 4.2, 7.7, 5, 1.54};  // e2e, wait, prompt, answer, steps, step
  r.stages[1].breakdown = s2.breakdown;
  r.stages[0].breakdown = {62.5, 50.0, 4.4, 8.1, 5, 1.62};
  const auto t = check_targets(r);
  ASSERT_EQ(t.size(), 7u);
  EXPECT_EQ(t[0].verdict, "met");  // 62.9 / 1.2 = 52x
  EXPECT_NE(t[0].last.find("52.4x lower"), std::string::npos) << t[0].last;
  // Stage 0 sustains no rate: no ratio, and the reason from its own options and probes.
  EXPECT_EQ(t[1].verdict, "not defined");
  EXPECT_EQ(t[1].stage0, "none req/s");
  EXPECT_NE(t[1].why.find("stage 0 met the budget at no probed rate (2 rates from 4.00 to 8.00 "
                          "req/s, 4 runs; at best a median of 98.0%"),
            std::string::npos)
      << t[1].why;
  EXPECT_NE(t[1].why.find("up to 50 ms for the batch to fill"), std::string::npos) << t[1].why;
  EXPECT_NE(t[1].why.find("stage 4 sustains 857.62 req/s"), std::string::npos) << t[1].why;
  EXPECT_NE(t[1].why.find("either: 2 (batching static)"), std::string::npos) << t[1].why;
  EXPECT_EQ(t[2].verdict, "met");     // clean intent unchanged
  EXPECT_EQ(t[3].verdict, "met");     // clean slot F1 unchanged
  EXPECT_EQ(t[4].verdict, "missed");  // noisy intent -1.0 point
  EXPECT_NE(t[4].last.find("-1.0 points"), std::string::npos) << t[4].last;
  EXPECT_NE(t[4].why.find("stage 2 (+ structured pruning and distillation: model_file: "
                          "teacher-q8_0.gguf -> student-q8_0.gguf) took it from 93.5% to 92.5%"),
            std::string::npos)
      << t[4].why;
  EXPECT_EQ(t[5].verdict, "met");  // noisy slot F1 went up: within
  // The lever of stage 2 against stage 0 (stage 1 not measured here); stage 4 has no step target.
  EXPECT_EQ(t[6].verdict, "missed");
  EXPECT_NE(t[6].target.find("stage 2 (+ structured pruning and distillation): P50 at least 1.2x "
                             "lower than stage 0's"),
            std::string::npos)
      << t[6].target;
  EXPECT_NE(t[6].why.find("stage 2: wait 50.1 + prompt 4.2 + answer 7.7 ms (5.0 steps x 1.54 ms)"),
            std::string::npos)
      << t[6].why;
  r.stages[1].p50_ms = 50;  // 62.9 / 50 = 1.26x
  EXPECT_EQ(check_targets(r)[6].verdict, "met");
  r.stages[1].p50_ms = 62.9;

  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("## Targets"), std::string::npos);
  EXPECT_NE(md.find("| 4 | x0.02 | – | not defined |"), std::string::npos) << md;
  EXPECT_EQ(md.find("inf"), std::string::npos);
  EXPECT_NE(md.find("Where a target is not met:"), std::string::npos);
  const auto j = render_json(r);
  ASSERT_EQ(j["targets"].size(), 7u);
  EXPECT_EQ(j["targets"][1]["verdict"], "not defined");
  EXPECT_TRUE(j["stages"][2]["ratio_to_stage0"]["max_rate"].is_null());
  EXPECT_EQ(j["stages"][0]["probes"][0]["runs"].size(), 2u);

  // Both rates defined: the ratio decides; a search stopped at its bound does not decide it.
  r.stages[0].rate.best_rate = 100;
  EXPECT_EQ(check_targets(r)[1].verdict, "missed");
  r.stages[2].rate.lower_bound = true;
  EXPECT_EQ(check_targets(r)[1].verdict, "not decided");  // >= 8.6x: could still reach 15
  r.stages[0].rate.best_rate = 50;
  EXPECT_EQ(check_targets(r)[1].verdict, "met");
  EXPECT_NE(check_targets(r)[1].last.find(">= 857.62 req/s (>= 17.2x)"), std::string::npos)
      << check_targets(r)[1].last;
  // Stage 0 passed every probed rate: its rate is a lower bound, the ratio an upper one.
  r.stages[2].rate.lower_bound = false;
  r.stages[0].rate.lower_bound = true;
  r.stages[0].rate.best_rate = 100;  // <= 8.6x: missed whatever stage 0's true capacity
  EXPECT_EQ(check_targets(r)[1].verdict, "missed");
  EXPECT_NE(check_targets(r)[1].why.find("at most 8.58x stage 0's rate (per stage: 0 >= 100.00, "
                                         "2 none, 4 857.62 req/s)"),
            std::string::npos)
      << check_targets(r)[1].why;
  // Static batching that fills its batches faster than it waits: the reason is said.
  r.stages[0].options["batch_size"] = "8";
  r.stages[0].rate.lower_bound = false;
  r.stages[0].rate.best_rate = 400;
  EXPECT_NE(check_targets(r)[1].why.find("at 400.00 req/s stage 0's static batches of 8 fill in "
                                         "~20 ms on average, inside its 50 ms batch wait"),
            std::string::npos)
      << check_targets(r)[1].why;
  r.stages[0].rate.lower_bound = true;
  r.stages[0].rate.best_rate = 50;  // <= 17.2x: undecided
  EXPECT_EQ(check_targets(r)[1].verdict, "not decided");
  r.stages[2].rate.lower_bound = true;  // both bounds: undecided
  EXPECT_EQ(check_targets(r)[1].verdict, "not decided");
  r.stages[0].rate.lower_bound = false;
  // The last stage sustains nothing: missed, naming it.
  r.stages[2].rate = {};
  EXPECT_EQ(check_targets(r)[1].verdict, "missed");
  EXPECT_NE(check_targets(r)[1].why.find("stage 4 met the budget at no probed rate"),
            std::string::npos);
}

TEST(Process, RunCheckedReportsFailuresAndKillsWhatOverruns) {
  const fs::path d = temp_dir("proc");
  const std::string log = (d / "log").string();
  EXPECT_NO_THROW(run_checked({"/bin/sh", "-c", "echo hello"}, log, 10));
  EXPECT_NE(tail_of(log, 5).find("hello"), std::string::npos);
  // A child's environment: this process's, with the given variables replaced or added.
  setenv("SHRIKE_OPT_TEST_A", "old", 1);
  setenv("SHRIKE_OPT_TEST_B", "kept", 1);
  EXPECT_NO_THROW(
      run_checked({"/bin/sh", "-c", "echo \"env $SHRIKE_OPT_TEST_A $SHRIKE_OPT_TEST_B\""}, log, 10,
                  {"SHRIKE_OPT_TEST_A=new"}));
  EXPECT_NE(tail_of(log, 1).find("env new kept"), std::string::npos) << tail_of(log, 3);
  EXPECT_EQ(no_blas_threads_env(), std::vector<std::string>{"OPENBLAS_NUM_THREADS=1"});
  try {
    run_checked({"/bin/sh", "-c", "echo broken >&2; exit 3"}, log, 10);
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exit status 3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos);
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(run_checked({"/bin/sleep", "30"}, log, 0.3), std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  pid_t pid = 0;
  {
    Child c({"/bin/sleep", "30"}, log);
    pid = c.pid();
    EXPECT_FALSE(c.poll());
  }  // the destructor stops it
  EXPECT_NE(kill(pid, 0), 0);
  EXPECT_EQ(shell_join({"a", "b c", "it's"}), "a 'b c' 'it'\\''s'");
  fs::remove_all(d);
}
