// Trace readers: each format from small inline files, malformed lines named by file and line,
// and the real traces in ../shared/data/traces when present.
#include "loadtest/trace.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/file_buffer.h"
#include "shared_data.h"

namespace shrike::loadtest {
namespace {

void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_trace(text, "t.trace");
    FAIL() << "no error for: " << text;
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LoadtestTrace, AzureCsv) {
  const auto t = parse_trace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 18:15:46.6805900,374,44\r\n"
      "2023-11-16 18:15:50.9951690,396,109\r\n"
      "2023-11-16 18:16:00.0000000,1,2\r\n",
      "az.csv");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_DOUBLE_EQ(t[0].t, 0);
  EXPECT_NEAR(t[1].t, 4.314579, 1e-6);
  EXPECT_NEAR(t[2].t, 13.31941, 1e-6);
  EXPECT_EQ(t[1].input_tokens, 396);
  EXPECT_EQ(t[1].output_tokens, 109);
  EXPECT_TRUE(t[0].hash_ids.empty());
}

TEST(LoadtestTrace, MooncakeJsonlInMilliseconds) {
  const auto t = parse_trace(
      "{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 3000, \"input_length\": 700, \"output_length\": 3, \"hash_ids\": [0, 5]}\n",
      "mc.jsonl");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t[1].t, 3.0);
  EXPECT_EQ(t[0].input_tokens, 6758);
  EXPECT_EQ(t[1].hash_ids, (std::vector<int64_t>{0, 5}));
}

TEST(LoadtestTrace, OwnJsonlInSecondsSortedAndRebased) {
  const auto t = parse_trace(
      "{\"timestamp\": 10.5, \"input_tokens\": 5, \"output_tokens\": 6}\n\n"
      "{\"timestamp\": 10.0, \"input_tokens\": 7, \"output_tokens\": 8, \"hash_ids\": [3]}\n",
      "own.jsonl");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t[0].t, 0);
  EXPECT_DOUBLE_EQ(t[1].t, 0.5);
  EXPECT_EQ(t[0].input_tokens, 7);
  EXPECT_EQ(t[0].hash_ids, (std::vector<int64_t>{3}));
}

TEST(LoadtestTrace, BadLinesNameFileAndLine) {
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\nxx,1,2\n",
               "t.trace:3: bad TIMESTAMP");
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,-2\n",
               "t.trace:2: bad GeneratedTokens");
  expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1\n",
               "t.trace:2: expected 3");
  expect_error("TIMESTAMP,Foo\n", "t.trace:1: unknown CSV header");
  expect_error("{\"timestamp\": 0, \"input_tokens\": 1, \"output_tokens\": 1}\n{oops\n",
               "t.trace:2: invalid JSON");
  expect_error("{\"timestamp\": 0, \"input_tokens\": 1}\n", "t.trace:1: missing \"output_tokens\"");
  expect_error(
      "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": [\"a\"]}\n",
      "t.trace:1: \"hash_ids\" must be");
  expect_error("hello\n", "t.trace:1: unknown trace format");
  EXPECT_THROW(read_trace("/nonexistent/trace.csv"), FileError);
}

TEST(LoadtestTrace, RealAzureTraces) {
  SHRIKE_REQUIRE_SHARED("data/traces/azure_llm_2023/AzureLLMInferenceTrace_conv_first_half.csv");
  const auto dir = ::shrike::testing::shared_dir() + "/data/traces/azure_llm_2023/";
  const auto conv = read_trace(dir + "AzureLLMInferenceTrace_conv_first_half.csv");
  EXPECT_EQ(conv.size(), 9754u);  // rows per the trace README
  EXPECT_EQ(conv[0].input_tokens, 374);
  EXPECT_EQ(conv[0].output_tokens, 44);
  // 18:15:46.68059 to 18:44:59.93773.
  EXPECT_NEAR(conv.back().t, 29 * 60 + 13.25714, 1e-4);
  const auto code = read_trace(dir + "AzureLLMInferenceTrace_code_first_half.csv");
  EXPECT_EQ(code.size(), 5100u);
}

TEST(LoadtestTrace, RealMooncakeTraces) {
  SHRIKE_REQUIRE_SHARED("data/traces/mooncake_fast25/conversation_trace_first_half.jsonl");
  const auto dir = ::shrike::testing::shared_dir() + "/data/traces/mooncake_fast25/";
  const auto conv = read_trace(dir + "conversation_trace_first_half.jsonl");
  EXPECT_EQ(conv.size(), 5606u);
  EXPECT_EQ(conv[0].input_tokens, 6758);
  EXPECT_EQ(conv[0].hash_ids.size(), 14u);
  EXPECT_NEAR(conv.back().t, 1767.0, 1e-9);
  EXPECT_EQ(read_trace(dir + "synthetic_trace.jsonl").size(), 3993u);
}

}  // namespace
}  // namespace shrike::loadtest
