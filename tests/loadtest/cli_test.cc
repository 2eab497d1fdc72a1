// `shrike loadtest` as a user runs it: the Markdown report, --out-json and --out-svg against the
// stub server, trace replay, and the refusals (remote host, bad trace line).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run_shrike.h"
#include "stub_server.h"

namespace shrike::loadtest {
namespace {

std::string temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("shrike_lt_" + std::to_string(getpid()) + "_" + name))
      .string();
}

::shrike::testing::CommandResult shrike(const std::string& args) {
  return ::shrike::testing::run_shrike("loadtest " + args);
}

TEST(LoadtestCli, ReportJsonAndSvg) {
  testing::StubScript script;
  script.first_token_ms = 10;
  script.gap_ms = 5;
  script.tokens = 4;
  testing::StubServer server(script);
  const auto json_path = temp("out.json"), svg_path = temp("out.svg");
  const auto r =
      shrike("--url " + server.url() + " --endpoint chat --concurrency 3 --max-requests 9 " +
             "--slo ttft=1000,e2e=5000 --out-json " + json_path + " --out-svg " + svg_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| TTFT | 9 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("9 / 0 / 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("goodput"), std::string::npos) << r.out;
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["requests"].size(), 9u);
  EXPECT_EQ(j["requests"][0]["itl_ms"].size(), 3u);
  EXPECT_EQ(j["summary"]["good"], 9);
  std::ifstream sf(svg_path);
  std::stringstream svg;
  svg << sf.rdbuf();
  EXPECT_NE(svg.str().find("<polyline"), std::string::npos);
  std::filesystem::remove(json_path);
  std::filesystem::remove(svg_path);
}

TEST(LoadtestCli, TraceReplay) {
  testing::StubScript script;
  script.first_token_ms = 1;
  script.gap_ms = 1;
  script.tokens = 2;
  testing::StubServer server(script);
  const auto trace = temp("trace.jsonl"), json_path = temp("trace_out.json");
  std::ofstream(trace) << "{\"timestamp\": 0, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                          "{\"timestamp\": 1, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                          "{\"timestamp\": 2, \"input_tokens\": 5, \"output_tokens\": 2}\n"
                          "{\"timestamp\": 9, \"input_tokens\": 5, \"output_tokens\": 2}\n";
  const auto r = shrike("--url " + server.url() + " --trace " + trace +
                        " --speedup 10 --window 0:5 --out-json " + json_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream jf(json_path);
  const auto j = nlohmann::json::parse(jf);
  ASSERT_EQ(j["requests"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(j["requests"][i]["scheduled_s"].get<double>(), 0.1 * i);
    EXPECT_NEAR(j["requests"][i]["sent_s"].get<double>(), 0.1 * i, 0.05);
  }
  EXPECT_EQ(server.requests(), 3);
  std::filesystem::remove(trace);
  std::filesystem::remove(json_path);
}

TEST(LoadtestCli, RefusesRemoteHostsAndNamesBadTraceLines) {
  auto r = shrike("--url http://10.11.12.13:8080 --max-requests 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not loopback"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-remote"), std::string::npos) << r.err;
  const auto trace = temp("bad.csv");
  std::ofstream(trace) << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,1,x\n";
  r = shrike("--url http://127.0.0.1:9 --trace " + trace);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(trace + ":2: bad GeneratedTokens"), std::string::npos) << r.err;
  std::filesystem::remove(trace);
}

}  // namespace
}  // namespace shrike::loadtest
