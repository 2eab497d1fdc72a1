#include "engine/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace shrike::engine {
namespace {

// ---- A small parser of the Prometheus text format (0.0.4), strict about what we emit ----

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  std::string raw_value;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> help, type;  // by family name
  std::vector<Sample> samples;
};

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

std::string parse_name(const std::string& line, size_t& i) {
  const size_t start = i;
  while (i < line.size() && is_name_char(line[i], i == start)) ++i;
  if (i == start) throw std::runtime_error("no metric or label name: " + line);
  return line.substr(start, i - start);
}

double parse_value(const std::string& text) {
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || text.find_first_of(" \t") != std::string::npos || *end != '\0' ||
      text.find_first_of("iInN") != std::string::npos)
    throw std::runtime_error("not a sample value: '" + text + "'");
  return v;
}

// A sample line: name, optional {label="value",...}, one space, the value, nothing else.
Sample parse_sample(const std::string& line) {
  Sample s;
  size_t i = 0;
  s.name = parse_name(line, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const std::string key = parse_name(line, i);
      if (line.compare(i, 2, "=\"") != 0) throw std::runtime_error("no =\" after label: " + line);
      i += 2;
      std::string value;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (++i == line.size()) throw std::runtime_error("dangling escape: " + line);
          if (line[i] == 'n') {
            value += '\n';
          } else if (line[i] == '\\' || line[i] == '"') {
            value += line[i];
          } else {
            throw std::runtime_error("bad escape: " + line);
          }
        } else {
          value += line[i];
        }
        ++i;
      }
      if (i == line.size()) throw std::runtime_error("unterminated label value: " + line);
      ++i;  // closing quote
      if (!s.labels.emplace(key, value).second) throw std::runtime_error("repeated label: " + line);
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i == line.size()) throw std::runtime_error("unterminated labels: " + line);
    ++i;  // closing brace
  }
  if (i >= line.size() || line[i] != ' ')
    throw std::runtime_error("no space before value: " + line);
  s.raw_value = line.substr(i + 1);
  s.value = parse_value(s.raw_value);
  return s;
}

// The family a sample belongs to: histogram samples carry _bucket/_sum/_count suffixes.
std::string family_of(const Exposition& e, const std::string& name) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto t = e.type.find(base);
      if (t != e.type.end() && t->second == "histogram") return base;
    }
  }
  return name;
}

// Parses and checks the whole text: every line is a comment or a sample, every sample's family
// has HELP and TYPE before it, histogram buckets rise to +Inf == _count.
Exposition parse_exposition(const std::string& text) {
  Exposition e;
  if (!text.empty() && text.back() != '\n') throw std::runtime_error("no final newline");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) throw std::runtime_error("empty line");
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, keyword, name;
      words >> hash >> keyword >> name;
      std::string rest;
      std::getline(words, rest);
      if (keyword == "HELP") {
        if (!e.help.emplace(name, rest).second) throw std::runtime_error("second HELP: " + line);
      } else if (keyword == "TYPE") {
        const std::set<std::string> types{"counter", "gauge", "histogram", "summary", "untyped"};
        if (!types.count(rest.substr(rest.empty() ? 0 : 1)))
          throw std::runtime_error("bad TYPE: " + line);
        if (!e.type.emplace(name, rest.substr(1)).second)
          throw std::runtime_error("second TYPE: " + line);
      }
      continue;
    }
    Sample s = parse_sample(line);
    const std::string family = family_of(e, s.name);
    if (!e.help.count(family) || !e.type.count(family))
      throw std::runtime_error("sample before its HELP and TYPE: " + line);
    e.samples.push_back(std::move(s));
  }
  // Each histogram series (its labels apart from le: one per model) is checked on its own.
  const auto series_of = [](const Sample& s) {
    std::map<std::string, std::string> l = s.labels;
    l.erase("le");
    return l;
  };
  for (const auto& [name, type] : e.type) {
    if (type != "histogram") continue;
    std::set<std::map<std::string, std::string>> all_series;
    for (const Sample& s : e.samples)
      if (s.name == name + "_count") all_series.insert(series_of(s));
    for (const auto& series : all_series) {
      double last_le = -std::numeric_limits<double>::infinity(), last_count = 0;
      bool saw_inf = false;
      double count = -1;
      for (const Sample& s : e.samples) {
        if (series_of(s) != series) continue;
        if (s.name == name + "_bucket") {
          if (!s.labels.count("le")) throw std::runtime_error(name + ": bucket without le");
          const double le = parse_value(s.labels.at("le"));
          if (!(le > last_le)) throw std::runtime_error(name + ": le not increasing");
          if (s.value < last_count) throw std::runtime_error(name + ": buckets not cumulative");
          last_le = le;
          last_count = s.value;
          saw_inf = std::isinf(le);
        } else if (s.name == name + "_count") {
          count = s.value;
        }
      }
      if (!saw_inf) throw std::runtime_error(name + ": no +Inf bucket last");
      if (count != last_count) throw std::runtime_error(name + ": +Inf bucket != _count");
    }
  }
  return e;
}

const Sample* find(const Exposition& e, const std::string& name,
                   const std::map<std::string, std::string>& labels = {}) {
  for (const Sample& s : e.samples)
    if (s.name == name && s.labels == labels) return &s;
  return nullptr;
}

// ---- Histogram ----

TEST(Histogram, ValuesGoInTheFirstBucketWhoseBoundIsAtLeastThem) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, -3.0, std::nextafter(1.0, 2.0), 2.0, 5.0, 7.0, 1e300}) h.observe(v);
  h.observe(std::nan(""));  // ignored
  const auto s = h.snapshot();
  EXPECT_EQ(s.bounds, (std::vector<double>{1, 2, 5}));
  // le=1: 0.5, 1, -3; le=2: + 1.0000000000000002, 2; le=5: + 5; +Inf: + 7, 1e300.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{3, 5, 6, 8}));
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.sum, 0.5 + 1 - 3 + std::nextafter(1.0, 2.0) + 2 + 5 + 7 + 1e300);
}

TEST(Histogram, EmptyHistogramAndNoBounds) {
  Histogram h(latency_buckets());
  auto s = h.snapshot();
  EXPECT_EQ(s.cumulative, std::vector<uint64_t>(latency_buckets().size() + 1, 0));
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.sum, 0.0);
  Histogram only_inf({});
  only_inf.observe(3);
  s = only_inf.snapshot();
  EXPECT_EQ(s.cumulative, std::vector<uint64_t>{1});
}

TEST(Histogram, BoundsMustBeFiniteAndStrictlyIncreasing) {
  EXPECT_THROW(Histogram({1, 1}), std::invalid_argument);
  EXPECT_THROW(Histogram({2, 1}), std::invalid_argument);
  EXPECT_THROW(Histogram({1, std::nan("")}), std::invalid_argument);
  EXPECT_THROW(Histogram({1, std::numeric_limits<double>::infinity()}), std::invalid_argument);
  EXPECT_NO_THROW(Histogram({-1, 0, 0.5}));
}

TEST(Histogram, ConcurrentObserversLoseNothing) {
  Histogram h({0.25, 0.5, 1});
  constexpr int kThreads = 4, kEach = 20000;
  std::atomic<bool> done{false};
  // A reader snapshots while writers run: every snapshot must be consistent.
  std::thread reader([&] {
    while (!done.load()) {
      const auto s = h.snapshot();
      ASSERT_EQ(s.cumulative.back(), s.count);
      for (size_t i = 1; i < s.cumulative.size(); ++i)
        ASSERT_LE(s.cumulative[i - 1], s.cumulative[i]);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t)
    writers.emplace_back([&h, t] {
      for (int i = 0; i < kEach; ++i) h.observe(0.25 * ((i + t) % 4 + 1));  // 0.25 .. 1
    });
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  const auto s = h.snapshot();
  EXPECT_EQ(s.count, uint64_t(kThreads) * kEach);
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{20000, 40000, 80000, 80000}));
  EXPECT_EQ(s.sum, 0.625 * kThreads * kEach);  // quarters add exactly
}

TEST(Metrics, LatencyBucketsSpanOneMillisecondToAMinute) {
  const auto b = latency_buckets();
  ASSERT_GE(b.size(), 10u);
  EXPECT_EQ(b.front(), 0.001);
  EXPECT_EQ(b.back(), 60.0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

TEST(Metrics, FinishReasonNames) {
  EXPECT_STREQ(finish_reason_name(FinishReason::Stop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::Length), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::Cancelled), "cancelled");
  EXPECT_STREQ(finish_reason_name(FinishReason::Deadline), "deadline");
  EXPECT_STREQ(finish_reason_name(FinishReason::Error), "error");
  EXPECT_STREQ(finish_reason_name(FinishReason::kCount), "unknown");
}

TEST(Metrics, ValuesAreFormattedAsTheGoClientDoes) {
  const std::pair<double, const char*> cases[] = {{0.001, "0.001"},
                                                  {0.0025, "0.0025"},
                                                  {0.005, "0.005"},
                                                  {1, "1"},
                                                  {2.5, "2.5"},
                                                  {60, "60"},
                                                  {0, "0"},
                                                  {-0.5, "-0.5"},
                                                  {0.0001, "0.0001"},
                                                  {2.5e-05, "2.5e-05"},
                                                  {999999.5, "999999.5"},
                                                  {1e6, "1e+06"},
                                                  {1234567, "1.234567e+06"},
                                                  {0.1 + 0.2, "0.30000000000000004"},
                                                  {1e300, "1e+300"},
                                                  {-1.5e-300, "-1.5e-300"},
                                                  {123.456, "123.456"},
                                                  {100, "100"}};
  for (const auto& [v, text] : cases) EXPECT_EQ(format_prometheus_value(v), text) << v;
  EXPECT_EQ(format_prometheus_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_prometheus_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_prometheus_value(std::nan("")), "NaN");
  // Every value reads back exactly.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> mantissa(-10, 10);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int i = 0; i < 20000; ++i) {
    const double v = mantissa(rng) * std::pow(10.0, exponent(rng));
    const std::string text = format_prometheus_value(v);
    ASSERT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
}

TEST(Metrics, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("plain/route"), "plain/route");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_label_value(""), "");
}

// ---- The whole exposition ----

TEST(Metrics, RenderedTextParsesAndHoldsEveryValue) {
  EngineMetrics m;
  for (double v : {0.0005, 0.001, 0.003, 0.2, 45.0, 120.0}) m.e2e_latency.observe(v);
  m.time_to_first_token.observe(0.005);
  m.time_to_first_token.observe(0.0051);
  m.inter_token_latency.observe(0.02);
  m.finished[size_t(FinishReason::Stop)] = 7;
  m.finished[size_t(FinishReason::Deadline)] = 2;
  m.prompt_tokens = 1234;
  m.generated_tokens = 5678;
  m.preemptions = 3;
  m.rejected = 4;
  m.timed_out = 2;
  m.steps = 99;
  m.batch_tokens = 4321;
  m.spec_steps = 10;
  m.spec_proposed = 40;
  m.spec_accepted = 30;
  m.spec_draft_ns = 1000;
  m.forward_ns = 3000;
  EngineGauges g;
  g.running = 5;
  g.waiting = 6;
  g.kv_blocks_used = 70;
  g.kv_blocks_total = 1000;
  g.kv_blocks_cached = 12;
  g.kv_bytes_total = int64_t(1) << 40;  // large integers stay integers
  g.kv_bytes_used = 123456789;
  g.kv_f16_copy_bytes = 4567;
  g.kv_tokens_used = 890;
  g.kv_type = "int8-mixed";
  g.kv_bytes_per_token = 529.25;
  g.prefix_queried_tokens = 800;
  g.prefix_hit_tokens = 300;
  const std::vector<HttpRequestCount> http{
      {"/v1/completions", 200, 5}, {"/v1/completions", 400, 1}, {"/metrics", 200, 9}};

  const std::string text = render_prometheus(m, g, http);
  Exposition e;
  ASSERT_NO_THROW(e = parse_exposition(text)) << text;

  const std::map<std::string, std::string> families{
      {"shrike_request_latency_seconds", "histogram"},
      {"shrike_time_to_first_token_seconds", "histogram"},
      {"shrike_time_per_output_token_seconds", "histogram"},
      {"shrike_inter_token_latency_seconds", "histogram"},
      {"shrike_queue_wait_seconds", "histogram"},
      {"shrike_requests_finished_total", "counter"},
      {"shrike_prompt_tokens_total", "counter"},
      {"shrike_generation_tokens_total", "counter"},
      {"shrike_preemptions_total", "counter"},
      {"shrike_requests_rejected_total", "counter"},
      {"shrike_requests_timed_out_total", "counter"},
      {"shrike_engine_steps_total", "counter"},
      {"shrike_batch_tokens_total", "counter"},
      {"shrike_prefix_cache_queried_tokens_total", "counter"},
      {"shrike_prefix_cache_hit_tokens_total", "counter"},
      {"shrike_http_requests_total", "counter"},
      {"shrike_requests_running", "gauge"},
      {"shrike_requests_waiting", "gauge"},
      {"shrike_kv_blocks_used", "gauge"},
      {"shrike_kv_blocks_capacity", "gauge"},
      {"shrike_kv_blocks_usable", "gauge"},
      {"shrike_kv_blocks_committed", "gauge"},
      {"shrike_kv_blocks_cached", "gauge"},
      {"shrike_kv_cache_capacity_bytes", "gauge"},
      {"shrike_kv_cache_bytes_used", "gauge"},
      {"shrike_kv_cache_f16_copy_bytes", "gauge"},
      {"shrike_kv_cache_tokens_used", "gauge"},
      {"shrike_kv_cache_bytes_per_token", "gauge"},
      {"shrike_spec_steps_total", "counter"},
      {"shrike_spec_proposed_tokens_total", "counter"},
      {"shrike_spec_accepted_tokens_total", "counter"},
      {"shrike_spec_acceptance_rate", "gauge"},
      {"shrike_spec_mean_accepted_tokens", "gauge"},
      {"shrike_spec_draft_time_share", "gauge"}};
  EXPECT_EQ(e.type, families);
  EXPECT_DOUBLE_EQ(find(e, "shrike_spec_acceptance_rate")->value, 0.75);
  EXPECT_DOUBLE_EQ(find(e, "shrike_spec_mean_accepted_tokens")->value, 3.0);
  EXPECT_DOUBLE_EQ(find(e, "shrike_spec_draft_time_share")->value, 0.25);
  EXPECT_EQ(find(e, "shrike_spec_proposed_tokens_total")->raw_value, "40");
  for (const auto& [name, help] : e.help) EXPECT_GT(help.size(), 5u) << name;

  // Histogram: le=0.001 holds 0.0005 and the boundary value 0.001; 0.003 joins at 0.005.
  const std::string e2e = "shrike_request_latency_seconds";
  auto bucket = [&](const std::string& name, const char* le) {
    const Sample* s = find(e, name + "_bucket", {{"le", le}});
    return s ? s->raw_value : std::string("missing");
  };
  EXPECT_EQ(bucket(e2e, "0.001"), "2");
  EXPECT_EQ(bucket(e2e, "0.0025"), "2");
  EXPECT_EQ(bucket(e2e, "0.005"), "3");
  EXPECT_EQ(bucket(e2e, "0.25"), "4");
  EXPECT_EQ(bucket(e2e, "30"), "4");
  EXPECT_EQ(bucket(e2e, "60"), "5");
  EXPECT_EQ(bucket(e2e, "1"), "4");
  EXPECT_EQ(bucket(e2e, "+Inf"), "6");
  EXPECT_EQ(find(e, e2e + "_count")->raw_value, "6");
  EXPECT_DOUBLE_EQ(find(e, e2e + "_sum")->value, 0.0005 + 0.001 + 0.003 + 0.2 + 45 + 120);
  EXPECT_EQ(bucket("shrike_time_to_first_token_seconds", "0.005"), "1");
  EXPECT_EQ(bucket("shrike_time_to_first_token_seconds", "0.01"), "2");
  EXPECT_EQ(find(e, "shrike_queue_wait_seconds_count")->raw_value, "0");
  EXPECT_EQ(find(e, "shrike_queue_wait_seconds_sum")->raw_value, "0");

  // Every reason appears, zero or not.
  const std::map<std::string, std::string> reasons{
      {"stop", "7"}, {"length", "0"}, {"cancelled", "0"}, {"deadline", "2"}, {"error", "0"}};
  for (const auto& [reason, value] : reasons) {
    const Sample* s = find(e, "shrike_requests_finished_total", {{"reason", reason}});
    ASSERT_NE(s, nullptr) << reason;
    EXPECT_EQ(s->raw_value, value) << reason;
  }
  const std::map<std::string, std::string> plain{
      {"shrike_prompt_tokens_total", "1234"},
      {"shrike_generation_tokens_total", "5678"},
      {"shrike_preemptions_total", "3"},
      {"shrike_requests_rejected_total", "4"},
      {"shrike_requests_timed_out_total", "2"},
      {"shrike_engine_steps_total", "99"},
      {"shrike_batch_tokens_total", "4321"},
      {"shrike_prefix_cache_queried_tokens_total", "800"},
      {"shrike_prefix_cache_hit_tokens_total", "300"},
      {"shrike_requests_running", "5"},
      {"shrike_requests_waiting", "6"},
      {"shrike_kv_blocks_used", "70"},
      {"shrike_kv_blocks_capacity", "1000"},
      {"shrike_kv_blocks_cached", "12"},
      {"shrike_kv_cache_capacity_bytes", "1099511627776"},
      {"shrike_kv_cache_bytes_used", "123456789"},
      {"shrike_kv_cache_f16_copy_bytes", "4567"},
      {"shrike_kv_cache_tokens_used", "890"}};
  for (const auto& [name, value] : plain) {
    const Sample* s = find(e, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->raw_value, value) << name;
  }
  // Bytes per token, labelled with the cache type.
  const Sample* per_token = find(e, "shrike_kv_cache_bytes_per_token", {{"type", "int8-mixed"}});
  ASSERT_NE(per_token, nullptr);
  EXPECT_EQ(per_token->raw_value, "529.25");
  const Sample* ok =
      find(e, "shrike_http_requests_total", {{"route", "/v1/completions"}, {"code", "200"}});
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->raw_value, "5");
  const Sample* bad =
      find(e, "shrike_http_requests_total", {{"route", "/v1/completions"}, {"code", "400"}});
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->raw_value, "1");
  ASSERT_NE(find(e, "shrike_http_requests_total", {{"route", "/metrics"}, {"code", "200"}}),
            nullptr);
}

// Several models: every family once, one series per model labelled model="NAME"; with the vLLM
// names as well, the three gauges the Gateway API Inference Extension reads, per model_name.
TEST(Metrics, ModelsAreLabelledAndTheVllmGaugesFollowTheirOwn) {
  EngineMetrics ma, mb;
  ma.e2e_latency.observe(0.002);
  mb.e2e_latency.observe(0.2);
  mb.e2e_latency.observe(0.3);
  mb.generated_tokens = 17;
  EngineGauges ga, gb;
  ga.running = 3;
  ga.waiting = 0;
  ga.kv_blocks_used = 10;
  ga.kv_blocks_usable = 40;
  gb.running = 1;
  gb.waiting = 7;
  gb.kv_blocks_used = 0;
  gb.kv_blocks_usable = 0;  // no usable block: usage 0, not NaN
  PrometheusOptions opt;
  opt.vllm_compat = true;
  opt.shared_kv_budget_bytes = 1 << 20;
  opt.shared_kv_claimed_bytes = 1 << 19;
  const std::string text = render_prometheus({{"a", &ma, ga}, {"b\"x", &mb, gb}}, {}, opt);
  Exposition e;
  ASSERT_NO_THROW(e = parse_exposition(text)) << text;
  EXPECT_EQ(find(e, "shrike_requests_running", {{"model", "a"}})->raw_value, "3");
  EXPECT_EQ(find(e, "shrike_requests_running", {{"model", "b\"x"}})->raw_value, "1");
  EXPECT_EQ(find(e, "shrike_generation_tokens_total", {{"model", "b\"x"}})->raw_value, "17");
  EXPECT_EQ(find(e, "shrike_request_latency_seconds_count", {{"model", "a"}})->raw_value, "1");
  EXPECT_EQ(find(e, "shrike_request_latency_seconds_count", {{"model", "b\"x"}})->raw_value, "2");
  EXPECT_EQ(find(e, "shrike_request_latency_seconds_bucket", {{"le", "0.0025"}, {"model", "a"}})
                ->raw_value,
            "1");
  EXPECT_EQ(
      find(e, "shrike_requests_finished_total", {{"reason", "stop"}, {"model", "a"}})->raw_value,
      "0");
  EXPECT_EQ(find(e, "vllm:num_requests_waiting", {{"model_name", "a"}})->raw_value, "0");
  EXPECT_EQ(find(e, "vllm:num_requests_waiting", {{"model_name", "b\"x"}})->raw_value, "7");
  EXPECT_EQ(find(e, "vllm:num_requests_running", {{"model_name", "a"}})->raw_value, "3");
  EXPECT_EQ(find(e, "vllm:kv_cache_usage_perc", {{"model_name", "a"}})->raw_value, "0.25");
  EXPECT_EQ(find(e, "vllm:kv_cache_usage_perc", {{"model_name", "b\"x"}})->raw_value, "0");
  EXPECT_EQ(e.type.at("vllm:kv_cache_usage_perc"), "gauge");
  EXPECT_EQ(find(e, "shrike_kv_memory_budget_bytes")->raw_value, "1048576");
  EXPECT_EQ(find(e, "shrike_kv_memory_claimed_bytes")->raw_value, "524288");
  // Without the option, none of vLLM's names.
  EXPECT_EQ(render_prometheus({{"a", &ma, ga}}, {}, {}).find("vllm:"), std::string::npos);
}

TEST(Metrics, RouteLabelsSurviveEscaping) {
  const std::string odd = "/a\"b\\c\nd";
  const std::string text = render_prometheus(EngineMetrics{}, EngineGauges{}, {{odd, 404, 2}});
  EXPECT_NE(text.find("route=\"/a\\\"b\\\\c\\nd\""), std::string::npos) << text;
  Exposition e;
  ASSERT_NO_THROW(e = parse_exposition(text)) << text;
  const Sample* s = find(e, "shrike_http_requests_total", {{"route", odd}, {"code", "404"}});
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->value, 2);
}

TEST(Metrics, TheParserRejectsMalformedText) {
  // The checks above mean something only if the parser can fail.
  const std::string head = "# HELP x_total Things.\n# TYPE x_total counter\n";
  EXPECT_NO_THROW(parse_exposition(head + "x_total 1\n"));
  EXPECT_THROW(parse_exposition("x_total 1\n"), std::runtime_error);           // no HELP/TYPE
  EXPECT_THROW(parse_exposition(head + "x_total  1\n"), std::runtime_error);   // two spaces
  EXPECT_THROW(parse_exposition(head + "x_total one\n"), std::runtime_error);  // not a number
  EXPECT_THROW(parse_exposition(head + "x_total{a=\"b} 1\n"), std::runtime_error);
  EXPECT_THROW(parse_exposition(head + "x_total{a=\"\\t\"} 1\n"), std::runtime_error);
  EXPECT_THROW(parse_exposition(head + "x_total 1"), std::runtime_error);  // no final newline
  const std::string hist = "# HELP h Latency.\n# TYPE h histogram\n";
  EXPECT_NO_THROW(parse_exposition(hist + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
                                          "h_sum 3\nh_count 2\n"));
  EXPECT_THROW(parse_exposition(hist + "h_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\n"
                                       "h_sum 3\nh_count 2\n"),
               std::runtime_error);  // not cumulative
  EXPECT_THROW(parse_exposition(hist + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
                                       "h_sum 3\nh_count 3\n"),
               std::runtime_error);  // +Inf != count
}

}  // namespace
}  // namespace shrike::engine
