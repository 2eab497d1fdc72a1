// The soak's pieces without a server: the requests it writes, how answers are judged, the
// /metrics and /proc readers, and that every criterion fails when its measurement is bad.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loadtest/soak.h"
#include "loadtest/soak_traffic.h"

namespace shrike::loadtest {
namespace {

SoakServerShape shape() {
  SoakServerShape s;
  s.context = 512;
  s.vocab = 512;
  s.max_body_bytes = 1 << 20;
  return s;
}

TEST(SoakTraffic, RequestsAreWhatTheirKindSays) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 50; ++i) {
    const auto lp = make_soak_request(SoakKind::kLongPrompt, shape(), rng);
    const auto j = nlohmann::json::parse(lp.body);
    // Exactly at the limit: prompt + max_tokens == context.
    EXPECT_EQ(int64_t(j["prompt"].size()) + j["max_tokens"].get<int64_t>(), 512);
    for (const auto& id : j["prompt"]) EXPECT_TRUE(id.get<int64_t>() >= 3 && id < 512);
  }
  const auto over =
      nlohmann::json::parse(make_soak_request(SoakKind::kOverContext, shape(), rng).body);
  EXPECT_EQ(over["prompt"].size(), 512u);
  const auto big = make_soak_request(SoakKind::kOversize, shape(), rng);
  EXPECT_GT(big.body.size(), size_t(1 << 20));
  EXPECT_EQ(big.expected_status, 413);
  const auto d = make_soak_request(SoakKind::kDisconnect, shape(), rng);
  EXPECT_TRUE(d.stream && d.hang_up_after_first_token);
  const auto dl = nlohmann::json::parse(make_soak_request(SoakKind::kDeadline, shape(), rng).body);
  EXPECT_GT(dl["timeout"].get<double>(), 0);
  EXPECT_TRUE(dl["ignore_eos"].get<bool>());
  EXPECT_EQ(make_soak_request(SoakKind::kWrongMethod, shape(), rng).method, "GET");
  for (int k = int(SoakKind::kBadJson); k < int(SoakKind::kCount); ++k) {
    EXPECT_TRUE(is_malformed(SoakKind(k)));
    EXPECT_GE(make_soak_request(SoakKind(k), shape(), rng).expected_status, 400);
  }
  // Without a vocabulary size no token-id prompt is written.
  auto no_vocab = shape();
  no_vocab.vocab = 0;
  EXPECT_EQ(make_soak_request(SoakKind::kLongPrompt, no_vocab, rng).kind, SoakKind::kCompletion);
}

TEST(SoakTraffic, SseTokenIsTextNotTheRoleChunk) {
  EXPECT_FALSE(sse_has_token(R"(data: {"choices":[{"delta":{"role":"assistant","content":""}}]})"));
  EXPECT_TRUE(sse_has_token(R"(data: {"choices":[{"delta":{"content":"Hi"}}]})"));
  EXPECT_TRUE(sse_has_token(R"(data: {"choices":[{"text":" once"}]})"));
}

SoakOutcome judge(SoakKind kind, long status, const std::string& body, bool stream = false,
                  bool hung_up = false, bool transport = false) {
  SoakRequest r;
  r.kind = kind;
  r.stream = stream;
  if (is_malformed(kind)) r.expected_status = 400;
  return judge_soak_reply(r, status, body, hung_up, transport, nullptr);
}

TEST(SoakTraffic, JudgesAnswersAgainstTheDocumentedOnes) {
  using O = SoakOutcome;
  const std::string stop = R"({"choices":[{"text":"x","finish_reason":"stop"}]})";
  const std::string deadline =
      R"({"choices":[{"text":"","finish_reason":"length","finish_detail":"deadline"}]})";
  EXPECT_EQ(judge(SoakKind::kCompletion, 200, stop), O::kCompleted);
  EXPECT_EQ(judge(SoakKind::kDeadline, 200, deadline), O::kDeadline);
  EXPECT_EQ(judge(SoakKind::kCompletion, 200, R"({"choices":[{"finish_reason":"cancelled"}]})"),
            O::kUndocumented);
  EXPECT_EQ(judge(SoakKind::kCompletion, 200, R"({"choices":[{"text":"x"}]})"), O::kUndocumented);
  EXPECT_EQ(judge(SoakKind::kCompletion, 429, "{}"), O::kRefused429);
  EXPECT_EQ(judge(SoakKind::kCompletion, 503, "{}"), O::kRefused503);
  EXPECT_EQ(judge(SoakKind::kCompletion, 500, "{}"), O::kServerError);
  EXPECT_EQ(judge(SoakKind::kCompletion, 400, "{}"), O::kUndocumented);
  EXPECT_EQ(judge(SoakKind::kCompletion, 0, "", false, false, true), O::kTransport);
  // Streams: complete only with a finish_reason and [DONE], never with an error event.
  const std::string ok_stream =
      "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\n"
      "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{}}\n\ndata: [DONE]\n\n";
  EXPECT_EQ(judge(SoakKind::kCompletionStream, 200, ok_stream, true), O::kCompleted);
  EXPECT_EQ(judge(SoakKind::kCompletionStream, 200,
                  ok_stream.substr(0, ok_stream.find("data: [DONE]")), true),
            O::kUndocumented);
  EXPECT_EQ(judge(SoakKind::kCompletionStream, 200,
                  "data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n", true),
            O::kUndocumented);
  EXPECT_EQ(judge(SoakKind::kDisconnect, 200, "data: {...", true, true), O::kCancelled);
  // Malformed requests: their own 4xx only.
  EXPECT_EQ(judge(SoakKind::kBadJson, 400, "{}"), O::kRejected4xx);
  EXPECT_EQ(judge(SoakKind::kBadJson, 200, stop), O::kUndocumented);
  EXPECT_EQ(judge(SoakKind::kBadJson, 500, "{}"), O::kServerError);
}

TEST(SoakMetrics, SumsSamplesByNameAndLabel) {
  const std::string text =
      "# TYPE shrike_kv_blocks_used gauge\n"
      "shrike_kv_blocks_used{model=\"a\"} 3\n"
      "shrike_kv_blocks_used{model=\"b\"} 4\n"
      "shrike_kv_blocks_used_extra 100\n"
      "shrike_requests_finished_total{reason=\"stop\",model=\"a\"} 10\n"
      "shrike_requests_finished_total{reason=\"error\",model=\"a\"} 2\n"
      "shrike_requests_waiting 5\n";
  const auto m = parse_server_metrics(text);
  EXPECT_EQ(m.kv_blocks_used, 7);
  EXPECT_EQ(m.finished_total, 12);
  EXPECT_EQ(m.finished_error, 2);
  EXPECT_EQ(m.waiting, 5);
  EXPECT_EQ(parse_vm_rss("Name:\tshrike\nVmHWM:\t 900 kB\nVmRSS:\t  812 kB\n"), 812 * 1024);
  EXPECT_EQ(parse_vm_rss("Name: x\n"), -1);
}

// A run where everything held; each test below breaks one measurement.
SoakSummary good_run() {
  SoakSummary s;
  s.duration_s = s.wall_s = 100;
  s.warmup_s = 10;
  s.counts[size_t(SoakKind::kCompletion)][size_t(SoakOutcome::kCompleted)] = 90;
  s.counts[size_t(SoakKind::kDisconnect)][size_t(SoakOutcome::kCancelled)] = 10;
  s.counts[size_t(SoakKind::kBurst)][size_t(SoakOutcome::kRefused429)] = 5;
  s.counts[size_t(SoakKind::kBadJson)][size_t(SoakOutcome::kRejected4xx)] = 5;
  s.metrics_end.finished_total = 100;
  s.health_polls = 400;
  s.kv_blocks_used_end = s.running_end = s.waiting_end = 0;
  s.rss = {{0, 100 << 20}, {10, 110 << 20}, {50, 112 << 20}, {101, 111 << 20}};
  return s;
}

int failed(const SoakSummary& s, const std::string& criterion_start) {
  int n = 0;
  for (const auto& v : soak_verdicts(s, 0.05)) {
    if (!v.pass && v.criterion.rfind(criterion_start, 0) == 0) ++n;
    if (!v.pass && v.criterion.rfind(criterion_start, 0) != 0)
      ADD_FAILURE() << "unexpected failure: " << v.criterion << ": " << v.measured;
  }
  return n;
}

TEST(SoakVerdicts, EachCriterionFailsOnItsOwnMeasurement) {
  EXPECT_EQ(failed(good_run(), "-"), 0);
  auto s = good_run();
  s.counts[size_t(SoakKind::kCompletion)][size_t(SoakOutcome::kServerError)] = 1;
  EXPECT_EQ(failed(s, "no 5xx"), 1);

  s = good_run();
  s.counts[size_t(SoakKind::kWrongType)][size_t(SoakOutcome::kUndocumented)] = 1;
  EXPECT_EQ(failed(s, "every malformed"), 1);

  s = good_run();
  s.counts[size_t(SoakKind::kCompletion)][size_t(SoakOutcome::kUndocumented)] = 1;
  EXPECT_EQ(failed(s, "every accepted"), 1);

  s = good_run();
  s.metrics_end.finished_total = 99;  // the server lost one the client saw accepted
  EXPECT_EQ(failed(s, "the server finished"), 1);
  s = good_run();
  s.metrics_end.finished_error = 1;
  s.metrics_end.finished_total = 100;
  EXPECT_EQ(failed(s, "the server finished"), 1);

  s = good_run();
  s.counts[size_t(SoakKind::kBurst)][size_t(SoakOutcome::kRefused429)] = 0;
  EXPECT_EQ(failed(s, "bursts"), 1);

  s = good_run();
  s.rss.back().bytes = int64_t(110 << 20) * 106 / 100;  // +6% from the sample at 10 s
  EXPECT_EQ(failed(s, "resident memory"), 1);
  s.rss.clear();
  EXPECT_EQ(failed(s, "resident memory"), 1);

  s = good_run();
  s.kv_blocks_used_end = 2;
  EXPECT_EQ(failed(s, "KV blocks"), 1);

  s = good_run();
  s.health_failures = 1;
  EXPECT_EQ(failed(s, "/health"), 1);
  const auto report = soak_report(s, soak_verdicts(s, 0.05));
  EXPECT_NE(report.find("verdict: FAIL"), std::string::npos) << report;
}

}  // namespace
}  // namespace shrike::loadtest
