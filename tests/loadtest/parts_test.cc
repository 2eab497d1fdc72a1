// The pieces without a network: URL policy, prompt synthesis, SSE parsing, statistics, report.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/file_buffer.h"
#include "loadtest/prompts.h"
#include "loadtest/report.h"
#include "loadtest/sse.h"
#include "loadtest/stats.h"
#include "loadtest/url.h"

namespace shrike::loadtest {
namespace {

TEST(LoadtestUrl, OnlyLoopbackUnlessAllowed) {
  for (const char* ok : {"http://127.0.0.1:8080", "http://127.9.8.7/x", "http://localhost:1",
                         "http://[::1]:8080/", "https://LOCALHOST"})
    EXPECT_NO_THROW(check_url_allowed(ok, false)) << ok;
  for (const char* bad : {"http://10.0.0.1:8080", "http://128.0.0.1", "http://example.com",
                          "http://127.0.0.1.evil.com", "http://[::2]:80", "http://user@8.8.8.8/"})
    EXPECT_THROW(check_url_allowed(bad, false), std::invalid_argument) << bad;
  EXPECT_NO_THROW(check_url_allowed("http://10.0.0.1:8080", true));
  EXPECT_THROW(check_url_allowed("ftp://127.0.0.1", true), std::invalid_argument);
  EXPECT_EQ(endpoint_url("http://127.0.0.1:8080/", true),
            "http://127.0.0.1:8080/v1/chat/completions");
  EXPECT_EQ(endpoint_url("http://127.0.0.1:8080", false), "http://127.0.0.1:8080/v1/completions");
}

int words(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int n = 0;
  while (in >> w) ++n;
  return n;
}

TEST(LoadtestPrompts, LengthAndPrefixSharing) {
  EXPECT_EQ(words(synth_prompt(1000, {}, 0, 1)), 1000);
  EXPECT_EQ(synth_prompt(0, {}, 0, 1), "");
  // Different requests without hash ids do not share a prefix.
  EXPECT_NE(synth_prompt(50, {}, 0, 1).substr(0, 60), synth_prompt(50, {}, 1, 1).substr(0, 60));
  // Same first block hash: same first 512 words; different second block.
  const auto a = synth_prompt(1024, {4, 5}, 0, 1), b = synth_prompt(1024, {4, 6}, 1, 1);
  const auto cut = [](const std::string& s, int n) {
    size_t p = 0;
    for (int i = 0; i < n; ++i) p = s.find(' ', p + 1);
    return s.substr(0, p);
  };
  EXPECT_EQ(cut(a, 512), cut(b, 512));
  EXPECT_NE(a, b);
  EXPECT_EQ(synth_prompt(300, {4}, 7, 1), cut(a, 300));  // a shorter request, same block
}

TEST(LoadtestPrompts, PromptsFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("shrike_lt_prompts_" + std::to_string(getpid()) + ".jsonl");
  std::ofstream(path)
      << "{\"prompt\": \"hello there\"}\n\n{\"prompt\": \"x\", \"max_tokens\": 7}\n";
  const auto p = read_prompts(path.string());
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].prompt, "hello there");
  EXPECT_EQ(p[0].max_tokens, -1);
  EXPECT_EQ(p[1].max_tokens, 7);
  // The task data's utterances ("text") are prompts too (--endpoint intent).
  std::ofstream(path) << "{\"text\": \"where is my order\", \"intent\": \"order_status\"}\n";
  ASSERT_EQ(read_prompts(path.string()).size(), 1u);
  EXPECT_EQ(read_prompts(path.string())[0].prompt, "where is my order");
  std::ofstream(path) << "{\"prompt\": \"ok\"}\n{\"txt\": \"no\"}\n";
  try {
    read_prompts(path.string());
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ":2: expected"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

TEST(LoadtestSse, StreamSplitAcrossReads) {
  ResponseParser p(/*chat=*/false, /*stream=*/true);
  p.feed("data: {\"choices\":[{\"text\":\"a\"}]}\n\nda", 1.0);
  p.feed("ta: {\"choices\":[{\"text\":\"\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\r\n", 2.0);
  p.feed("\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n", 3.0);
  p.feed("\ndata: [DONE]\n\n", 4.0);
  p.finish(4.0);
  EXPECT_EQ(p.token_times(), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(p.usage_prompt_tokens(), 3);
  EXPECT_EQ(p.usage_completion_tokens(), 2);
  EXPECT_TRUE(p.saw_done());
  EXPECT_TRUE(p.error().empty());
}

TEST(LoadtestSse, ChatDeltaAndErrors) {
  ResponseParser p(true, true);
  p.feed("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", 1);
  p.feed("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", 2);
  p.feed("data: {\"error\":{\"message\":\"boom\"}}\n\n", 3);
  EXPECT_EQ(p.token_times().size(), 1u);
  EXPECT_EQ(p.error(), "boom");
  ResponseParser q(false, false);
  q.feed("{\"choices\":[{\"text\":\"hi\"}],\"usage\":{\"completion_tokens\":5}}", 1);
  q.finish(2);
  EXPECT_EQ(q.token_times(), (std::vector<double>{2}));
  EXPECT_EQ(q.usage_completion_tokens(), 5);
}

TEST(LoadtestStats, PercentilesAndSlo) {
  std::vector<double> v;
  for (int i = 1; i <= 101; ++i) v.push_back(i);
  v.push_back(NAN);
  const auto d = distribution(v);
  EXPECT_EQ(d.n, 101u);
  EXPECT_DOUBLE_EQ(d.mean, 51);
  EXPECT_DOUBLE_EQ(d.p50, 51);
  EXPECT_DOUBLE_EQ(d.p90, 91);
  EXPECT_DOUBLE_EQ(d.p99, 100);
  EXPECT_DOUBLE_EQ(d.max, 101);
  const auto s = parse_slo("ttft=500,e2e=2000.5");
  EXPECT_EQ(s.ttft_ms, 500);
  EXPECT_EQ(s.tpot_ms, 0);
  EXPECT_EQ(s.e2e_ms, 2000.5);
  EXPECT_THROW(parse_slo("ttft=abc"), std::invalid_argument);
  EXPECT_THROW(parse_slo("latency=5"), std::invalid_argument);
  EXPECT_THROW(parse_slo("tpot=-1"), std::invalid_argument);
}

TEST(LoadtestStats, SummaryAndReports) {
  RunResult run;
  run.wall_s = 2;
  run.intended_rate = 2;
  for (int i = 0; i < 4; ++i) {
    RequestRecord r;
    r.id = i;
    r.scheduled_s = r.sent_s = i * 0.5;
    r.outcome = i == 3 ? Outcome::kTimedOut : i == 2 ? Outcome::kFailed : Outcome::kCompleted;
    if (r.outcome == Outcome::kFailed) r.error = "boom";
    if (r.outcome == Outcome::kCompleted) {
      r.ttft = 0.1 * (i + 1);
      r.e2e = 1;
      r.output_tokens = 10;
      r.tpot = (r.e2e - r.ttft) / 9;
      r.itl = {0.1, 0.1};
    }
    run.records.push_back(r);
  }
  const auto s = summarise(run, parse_slo("ttft=150"));
  EXPECT_EQ(s.sent, 4);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.timed_out, 1);
  EXPECT_EQ(s.good, 1);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 1);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 10);
  EXPECT_DOUBLE_EQ(s.achieved_rate, 2);
  EXPECT_DOUBLE_EQ(s.ttft.mean, 0.15);
  ReportContext ctx;
  ctx.url = "http://127.0.0.1:1";
  ctx.slo = parse_slo("ttft=150");
  const auto md = markdown_report(s, ctx);
  EXPECT_NE(md.find("| TTFT | 2 | 150.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("2 / 1 / 1"), std::string::npos) << md;
  EXPECT_NE(md.find("error x1: boom"), std::string::npos) << md;
  EXPECT_NE(md.find("~1 token"), std::string::npos);
  const auto j = json_report(run, s, ctx);
  EXPECT_EQ(j["requests"].size(), 4u);
  EXPECT_EQ(j["requests"][3]["outcome"], "timed_out");
  EXPECT_TRUE(j["requests"][3]["ttft_ms"].is_null());
  const auto svg = svg_cdf(run);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("TTFT (n=2)"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace shrike::loadtest
