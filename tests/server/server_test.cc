// `shrike serve` end to end: a synthetic model is written, the real binary serves it on a free
// port, and requests go over HTTP (httplib's client, raw sockets for what clients never send, and
// the curl binary for raw SSE).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/sanitizers.h"
#include "metrics_probe.h"
#include "run_shrike.h"
#include "server_process.h"

namespace shrike::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kKey = "sk-test-key";
constexpr int64_t kContext = 256;

struct Reply {
  int status = 0;  // 0: no response
  std::string body;
  httplib::Headers headers;
  std::string header(const std::string& k) const {
    const auto it = headers.find(k);
    return it == headers.end() ? std::string() : it->second;
  }
  json parsed() const { return json::parse(body, nullptr, false); }
};

Reply to_reply(const httplib::Result& r) {
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  out.headers = r->headers;
  return out;
}

httplib::Headers auth(const std::string& key = kKey) {
  return {{"Authorization", "Bearer " + key}};
}

std::unique_ptr<httplib::Client> client_for(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_read_timeout(120, 0);
  c->set_write_timeout(30, 0);
  c->set_connection_timeout(5, 0);
  return c;
}

Reply post(int port, const std::string& path, const std::string& body,
           const httplib::Headers& headers = auth(),
           const std::string& content_type = "application/json") {
  return to_reply(client_for(port)->Post(path.c_str(), headers, body, content_type.c_str()));
}

Reply get(int port, const std::string& path, const httplib::Headers& headers = auth()) {
  return to_reply(client_for(port)->Get(path.c_str(), headers));
}

// A sample line without its model="..." label (the server labels every engine metric by model;
// these tests serve one).
std::string without_model_label(std::string line) {
  const size_t at = line.find("model=\"");
  if (at == std::string::npos) return line;
  const size_t end = line.find('"', at + 7);
  if (end == std::string::npos) return line;
  if (line[at - 1] == ',') return line.erase(at - 1, end + 1 - (at - 1));
  if (line[end + 1] == '}') return line.erase(at - 1, end + 2 - (at - 1));  // {model="x"}
  return line.erase(at, end + 2 - at);                                      // {model="x",...}
}

// The value of an unlabelled (or exactly labelled) sample in Prometheus text, or -1.
double metric(const std::string& text, const std::string& name_and_labels) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line = without_model_label(line);
    if (line.rfind(name_and_labels + " ", 0) == 0)
      return std::stod(line.substr(name_and_labels.size() + 1));
  }
  return -1;
}

// metric() of a live server's /metrics (exact labels, the model label dropped); metrics_probe.h's
// scrape_metric() matches a prefix instead.
double scrape_metric(int port, const std::string& name_and_labels) {
  const Reply r = get(port, "/metrics", {});
  return r.status == 200 ? metric(r.body, name_and_labels) : -1;
}

// ServerProcess::start returns at "listening on", before the model is attached: until then
// generation routes answer 503 "loading". Start-up is quick in a Release build but takes seconds
// under ThreadSanitizer, so tests that need a request to run at once wait for /health 200 first.
bool ready(int port) {
  return eventually([&] { return get(port, "/health", {}).status == 200; }, 60);
}

// The `data: ` payloads of an SSE body, in order; comment lines are skipped. Fails the test on
// any other kind of line.
std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == ':') continue;
    if (line.rfind("data: ", 0) != 0) {
      ADD_FAILURE() << "not an SSE data line: " << line;
      continue;
    }
    out.push_back(line.substr(6));
  }
  return out;
}

// The text a stream carried, checking the OpenAI chunk shape on the way: every chunk is JSON of
// the right object type, finish_reason is set on the last choice chunk only, [DONE] comes last.
struct StreamResult {
  std::string text;
  std::string finish_reason;
  json usage;
  size_t chunks = 0;
};
StreamResult collect_stream(const std::string& body, bool chat) {
  StreamResult r;
  const auto data = sse_data(body);
  EXPECT_FALSE(data.empty());
  if (data.empty()) return r;
  EXPECT_EQ(data.back(), "[DONE]");
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json j = json::parse(data[i], nullptr, false);
    EXPECT_TRUE(j.is_object()) << data[i];
    if (!j.is_object()) continue;
    EXPECT_EQ(j["object"], chat ? "chat.completion.chunk" : "text_completion");
    EXPECT_FALSE(j.contains("error")) << data[i];
    if (j.contains("usage") && j["usage"].is_object()) r.usage = j["usage"];
    if (j["choices"].empty()) continue;
    ++r.chunks;
    EXPECT_TRUE(r.finish_reason.empty()) << "a chunk after the one with finish_reason";
    const json& c = j["choices"][0];
    r.text += chat ? c["delta"].value("content", "") : c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) r.finish_reason = c["finish_reason"];
  }
  return r;
}

std::string synth_model(const fs::path& path, const std::string& shape) {
  const auto r = run_shrike("synth " + shape + " --type f32 -o " + path.string());
  return r.exit_code == 0 ? std::string() : "shrike synth failed: " + r.err;
}

// ---------------------------------------------------------------------------------------------
// One server for the API and hostile-request tests: a tiny model, an API key.

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("shrike_server_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    setup_error_ =
        new std::string(synth_model(*dir_ / "tiny.gguf",
                                    "--dim 64 --layers 2 --heads 4 --ffn 128 --vocab 512 "
                                    "--context " +
                                        std::to_string(kContext)));
    server_ = new ServerProcess();
    if (setup_error_->empty() && !server_->start({(*dir_ / "tiny.gguf").string(), "--api-key", kKey,
                                                  "--threads", "1", "--max-body-mb", "8"}))
      *setup_error_ = "shrike serve did not start:\n" + server_->log();
  }
  static void TearDownTestSuite() {
    server_->signal(SIGTERM);
    const int code = server_->wait_exit(30);
    EXPECT_EQ(code, 0) << server_->log();
    delete server_;
    fs::remove_all(*dir_);
    delete dir_;
    delete setup_error_;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_->empty()) << *setup_error_; }
  // Acceptance 4: whatever a test did (errors, stops, deadlines), no KV block stays in use.
  void TearDown() override {
    if (!setup_error_->empty()) return;
    EXPECT_TRUE(eventually([&] { return scrape_metric(port(), "shrike_kv_blocks_used") == 0; }, 5))
        << "KV blocks still in use after the test";
  }
  int port() const { return server_->port(); }

  void expect_healthy() {
    const Reply h = get(port(), "/health", {});
    EXPECT_EQ(h.status, 200);
    EXPECT_EQ(h.parsed().value("status", ""), "ok");
  }

  static fs::path* dir_;
  static std::string* setup_error_;
  static ServerProcess* server_;
};
fs::path* ServerTest::dir_ = nullptr;
std::string* ServerTest::setup_error_ = nullptr;
ServerProcess* ServerTest::server_ = nullptr;

TEST_F(ServerTest, CompletionNonStreaming) {
  const Reply r = post(
      port(), "/v1/completions",
      R"({"model": "tiny", "prompt": "Once upon a time", "max_tokens": 8, "ignore_eos": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.header("Content-Type").find("application/json"), std::string::npos);
  const json j = r.parsed();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_TRUE(j["created"].is_number_integer());
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_TRUE(j["choices"][0]["text"].is_string());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 1);
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(), j["usage"]["prompt_tokens"].get<int>() + 8);
}

// Issue 15: guided_* and response_format apply in the engine. Every answer matches its
// constraint and stops there; streaming gives the same text; jump-forward (the default) gives the
// same answer as "jump_forward": false in fewer engine steps.
TEST_F(ServerTest, ConstrainedOutputsMatchAndJumpForwardSavesSteps) {
  struct Case {
    std::string options;
    std::function<bool(const std::string&)> valid;
  };
  const std::vector<Case> cases = {
      {R"("guided_choice": ["red apple", "green pear", "blue"])",
       [](const std::string& t) { return t == "red apple" || t == "green pear" || t == "blue"; }},
      {R"x("guided_regex": "code-[0-9]{2}-(ok|fail)")x",
       [](const std::string& t) {
         return std::regex_match(t, std::regex("code-[0-9]{2}-(ok|fail)"));
       }},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema":
          {"type": "object", "properties": {"intent": {"enum": ["play_music", "set_alarm"]},
           "slots": {"type": "object", "properties": {"song": {"type": "string", "maxLength": 5}}}},
           "required": ["intent", "slots"]}}})",
       [](const std::string& t) {
         const json j = json::parse(t, nullptr, false);
         return !j.is_discarded() && j.contains("slots") &&
                (j["intent"] == "play_music" || j["intent"] == "set_alarm");
       }},
  };
  for (const auto& c : cases) {
    for (const char* prompt : {"Once upon a time", "Tell me"}) {
      SCOPED_TRACE(c.options + " / " + prompt);
      const std::string base =
          std::string(R"({"prompt": ")") + prompt + R"(", "max_tokens": 100, )" + c.options;
      const double s0 = scrape_metric(port(), "shrike_engine_steps_total");
      const Reply a = post(port(), "/v1/completions", base + "}");
      const double s1 = scrape_metric(port(), "shrike_engine_steps_total");
      const Reply b = post(port(), "/v1/completions", base + R"(, "jump_forward": false})");
      const double s2 = scrape_metric(port(), "shrike_engine_steps_total");
      ASSERT_EQ(a.status, 200) << a.body;
      ASSERT_EQ(b.status, 200) << b.body;
      const std::string text = a.parsed()["choices"][0]["text"];
      EXPECT_TRUE(c.valid(text)) << text;
      EXPECT_EQ(a.parsed()["choices"][0]["finish_reason"], "stop");
      EXPECT_EQ(b.parsed()["choices"][0]["text"], text);
      EXPECT_LT(s1 - s0, s2 - s1) << "jump-forward should need fewer engine steps";
      const Reply s = post(port(), "/v1/completions", base + R"(, "stream": true})");
      ASSERT_EQ(s.status, 200) << s.body;
      std::string streamed;
      for (const auto& d : sse_data(s.body)) {
        if (d == "[DONE]") continue;
        const json chunk = json::parse(d);
        if (!chunk["choices"].empty()) streamed += chunk["choices"][0].value("text", "");
      }
      EXPECT_EQ(streamed, text);
    }
  }
}

TEST_F(ServerTest, GreedyIsRepeatableAndStreamingMatches) {
  for (const bool chat : {false, true}) {
    SCOPED_TRACE(chat ? "chat" : "completions");
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    const std::string input =
        chat ? R"("messages": [{"role": "user", "content": "Tell me a story"}])"
             : R"("prompt": "Tell me a story")";
    const std::string body = "{" + input + R"(, "max_tokens": 12, "ignore_eos": true)";
    const Reply a = post(port(), path, body + "}");
    const Reply b = post(port(), path, body + "}");
    ASSERT_EQ(a.status, 200) << a.body;
    ASSERT_EQ(b.status, 200) << b.body;
    const json ja = a.parsed(), jb = b.parsed();
    const std::string text = chat ? ja["choices"][0]["message"]["content"].get<std::string>()
                                  : ja["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(ja["choices"], jb["choices"]);
    if (chat) {
      EXPECT_EQ(ja["object"], "chat.completion");
      EXPECT_EQ(ja["choices"][0]["message"]["role"], "assistant");
    }

    const Reply s = post(port(), path,
                         body + R"(, "stream": true, "stream_options": {"include_usage": true}})");
    ASSERT_EQ(s.status, 200) << s.body;
    EXPECT_EQ(s.header("Content-Type"), "text/event-stream");
    const StreamResult sr = collect_stream(s.body, chat);
    EXPECT_EQ(sr.text, text);
    EXPECT_EQ(sr.finish_reason, "length");
    EXPECT_GE(sr.chunks, 2u);
    ASSERT_TRUE(sr.usage.is_object()) << "include_usage sent no usage chunk";
    EXPECT_EQ(sr.usage["completion_tokens"], 12);
    EXPECT_EQ(sr.usage["prompt_tokens"], ja["usage"]["prompt_tokens"]);
  }
}

TEST_F(ServerTest, StreamWithoutUsageHasNoUsageChunk) {
  const Reply s = post(port(), "/v1/completions",
                       R"({"prompt": "abc", "max_tokens": 4, "ignore_eos": true, "stream": true})");
  ASSERT_EQ(s.status, 200);
  const StreamResult sr = collect_stream(s.body, false);
  EXPECT_TRUE(sr.usage.is_null());
  EXPECT_EQ(sr.finish_reason, "length");
}

TEST_F(ServerTest, StopStringEndsTheOutput) {
  const std::string base = R"({"prompt": "The cat", "max_tokens": 24, "ignore_eos": true)";
  const Reply full = post(port(), "/v1/completions", base + "}");
  ASSERT_EQ(full.status, 200);
  const std::string text = full.parsed()["choices"][0]["text"];
  if (text.size() < 6) GTEST_SKIP() << "output too short to pick a stop string from: " << text;
  const std::string stop = text.substr(3, 2);
  const size_t cut = text.find(stop);
  const Reply r =
      post(port(), "/v1/completions", base + R"(, "stop": [)" + json(stop).dump() + "]}");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.parsed()["choices"][0]["text"], text.substr(0, cut));
  EXPECT_EQ(r.parsed()["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerTest, TokenIdPromptAndContextLimits) {
  const Reply r = post(port(), "/v1/completions", R"({"prompt": [1, 50, 60], "max_tokens": 2})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.parsed()["usage"]["prompt_tokens"], 3);

  // Without max_tokens the request may use the rest of the context.
  const Reply rest =
      post(port(), "/v1/completions", R"({"prompt": [1, 50, 60], "ignore_eos": true})");
  ASSERT_EQ(rest.status, 200) << rest.body;
  EXPECT_EQ(rest.parsed()["usage"]["completion_tokens"], kContext - 3);
  EXPECT_EQ(rest.parsed()["choices"][0]["finish_reason"], "length");

  auto ids = [](int64_t n) {
    json a = json::array();
    for (int64_t i = 0; i < n; ++i) a.push_back(5 + i % 100);
    return a.dump();
  };
  EXPECT_EQ(post(port(), "/v1/completions",
                 R"({"prompt": )" + ids(kContext - 1) + R"(, "max_tokens": 1})")
                .status,
            200);
  const Reply over = post(port(), "/v1/completions",
                          R"({"prompt": )" + ids(kContext - 1) + R"(, "max_tokens": 2})");
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(over.parsed()["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(post(port(), "/v1/completions", R"({"prompt": )" + ids(kContext) + "}").status, 400);
}

TEST_F(ServerTest, Logprobs) {
  const Reply c = post(port(), "/v1/completions",
                       R"({"prompt": "abc", "max_tokens": 5, "ignore_eos": true, "logprobs": 2})");
  ASSERT_EQ(c.status, 200) << c.body;
  const json lp = c.parsed()["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << c.body;
  EXPECT_EQ(lp["tokens"].size(), 5u);
  EXPECT_EQ(lp["token_logprobs"].size(), 5u);
  ASSERT_EQ(lp["top_logprobs"].size(), 5u);
  for (const auto& top : lp["top_logprobs"]) {
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 2u);
  }
  for (const auto& v : lp["token_logprobs"]) EXPECT_LE(v.get<double>(), 0.0);

  const Reply chat = post(port(), "/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                              "ignore_eos": true, "logprobs": true, "top_logprobs": 3})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json content = chat.parsed()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 4u);
  for (const auto& t : content) {
    EXPECT_TRUE(t["token"].is_string());
    EXPECT_EQ(t["top_logprobs"].size(), 3u);
    EXPECT_TRUE(t["bytes"].is_array());
  }
  // Greedy: the chosen token is the most likely one.
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(),
                  content[0]["top_logprobs"][0]["logprob"].get<float>());
}

TEST_F(ServerTest, DeadlineEndsTheRequest) {
  const Reply r =
      post(port(), "/v1/completions",
           R"({"prompt": "abc", "max_tokens": 200, "ignore_eos": true, "timeout": 0.000001})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = r.parsed()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(c["finish_detail"], "deadline");
  EXPECT_LT(r.parsed()["usage"]["completion_tokens"].get<int>(), 200);
}

TEST_F(ServerTest, ModelsHealthMetrics) {
  const Reply m = get(port(), "/v1/models");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.parsed()["object"], "list");
  EXPECT_EQ(m.parsed()["data"][0]["id"], "tiny");
  EXPECT_EQ(m.parsed()["data"][0]["object"], "model");
  // The shrike extension: the effective serving options (defaults here).
  const json o = m.parsed()["data"][0]["shrike"]["serving_options"];
  EXPECT_EQ(o["batching"], "continuous") << m.body;
  EXPECT_EQ(o["kv_type"], "f16");
  EXPECT_EQ(o["prefix_cache"], "on");
  EXPECT_GT(std::stoll(o["kv_bytes"].get<std::string>()), 0);
  EXPECT_EQ(get(port(), "/v1/models/tiny").status, 200);
  EXPECT_EQ(get(port(), "/v1/models/other").status, 404);
  EXPECT_EQ(get(port(), "/v1/models", {}).status, 401);

  expect_healthy();
  ASSERT_EQ(post(port(), "/v1/completions", R"({"prompt": "x", "max_tokens": 1})").status, 200);
  const Reply metrics = get(port(), "/metrics", {});  // open without the key
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.header("Content-Type"), "text/plain; version=0.0.4");
  // A request is counted (httplib's logger) just after its response is written, which the
  // client may beat.
  EXPECT_TRUE(eventually(
      [&] {
        return scrape_metric(port(),
                             R"(shrike_http_requests_total{route="/v1/completions",code="200"})") >=
                   1 &&
               scrape_metric(port(),
                             R"(shrike_http_requests_total{route="/v1/models",code="401"})") >= 1;
      },
      5));
  EXPECT_GT(metric(metrics.body, "shrike_kv_blocks_capacity"), 0);
  // The engine frees a finished request's blocks just after its last event, which the response
  // may beat: the gauge reaches 0 within moments, not necessarily before the reply.
  EXPECT_TRUE(eventually([&] { return scrape_metric(port(), "shrike_kv_blocks_used") == 0; }, 5));
}

TEST_F(ServerTest, NulByteAndLenientContentType) {
  const Reply nul = post(port(), "/v1/completions", R"({"prompt": "a\u0000b", "max_tokens": 2})");
  EXPECT_EQ(nul.status, 200) << nul.body;
  EXPECT_TRUE(nul.parsed().is_object());
  // The body is read as JSON whatever Content-Type says (curl -d sends form encoding).
  const Reply plain = post(port(), "/v1/completions", R"({"prompt": "a", "max_tokens": 2})", auth(),
                           "application/x-www-form-urlencoded");
  EXPECT_EQ(plain.status, 200) << plain.body;
  expect_healthy();
}

// Acceptance 6: hostile and malformed requests, each with its status and an OpenAI error body.
struct Hostile {
  const char* name;
  std::function<Reply(int port)> send;
  int status;
  const char* type;
};

Reply post_completion(int port, const std::string& body) {
  return post(port, "/v1/completions", body);
}
Reply post_chat(int port, const std::string& body) {
  return post(port, "/v1/chat/completions", body);
}

std::vector<Hostile> hostile_requests() {
  const std::string bad = "invalid_request_error";
  auto c = [](std::string body) { return [body](int p) { return post_completion(p, body); }; };
  auto chat = [](std::string body) { return [body](int p) { return post_chat(p, body); }; };
  auto with = [](const std::string& extra) {
    return std::string(R"({"prompt": "hi", )") + extra + "}";
  };
  auto msgs = [](const std::string& messages) {
    return std::string(R"({"messages": )") + messages + "}";
  };
  std::string long_prompt;
  for (int i = 0; i < 2000; ++i) long_prompt += "word" + std::to_string(i) + " ";
  std::vector<Hostile> v = {
      {"invalid JSON", c("{prompt: hi}"), 400, "invalid_request_error"},
      {"truncated JSON", c(R"({"prompt": "hi", "max_tokens": 5)"), 400, "invalid_request_error"},
      {"empty body", c(""), 400, "invalid_request_error"},
      {"JSON array", c("[1, 2, 3]"), 400, "invalid_request_error"},
      {"JSON string", c(R"("hello")"), 400, "invalid_request_error"},
      {"JSON number", c("42"), 400, "invalid_request_error"},
      {"prompt missing", c(R"({"max_tokens": 5})"), 400, "invalid_request_error"},
      {"prompt wrong type", c(R"({"prompt": 5})"), 400, "invalid_request_error"},
      {"prompt empty array", c(R"({"prompt": []})"), 400, "invalid_request_error"},
      {"two prompts", c(R"({"prompt": ["a", "b"]})"), 400, "invalid_request_error"},
      {"token id outside the vocabulary", c(R"({"prompt": [1, 999999]})"), 400,
       "invalid_request_error"},
      {"negative token id", c(R"({"prompt": [1, -4]})"), 400, "invalid_request_error"},
      {"max_tokens -1", c(with(R"("max_tokens": -1)")), 400, "invalid_request_error"},
      {"max_tokens 0", c(with(R"("max_tokens": 0)")), 400, "invalid_request_error"},
      {"max_tokens huge", c(with(R"("max_tokens": 1000000000000)")), 400, "invalid_request_error"},
      {"max_tokens beyond int64", c(with(R"("max_tokens": 99999999999999999999999)")), 400,
       "invalid_request_error"},
      {"max_tokens 1.5", c(with(R"("max_tokens": 1.5)")), 400, "invalid_request_error"},
      {"max_tokens string", c(with(R"("max_tokens": "10")")), 400, "invalid_request_error"},
      {"temperature -1", c(with(R"("temperature": -1)")), 400, "invalid_request_error"},
      {"temperature 3", c(with(R"("temperature": 3)")), 400, "invalid_request_error"},
      {"temperature string", c(with(R"("temperature": "warm")")), 400, "invalid_request_error"},
      {"top_p 0", c(with(R"("top_p": 0)")), 400, "invalid_request_error"},
      {"top_p 2", c(with(R"("top_p": 2)")), 400, "invalid_request_error"},
      {"top_k -5", c(with(R"("top_k": -5)")), 400, "invalid_request_error"},
      {"min_p 2", c(with(R"("min_p": 2)")), 400, "invalid_request_error"},
      {"presence_penalty 5", c(with(R"("presence_penalty": 5)")), 400, "invalid_request_error"},
      {"frequency_penalty -3", c(with(R"("frequency_penalty": -3)")), 400, "invalid_request_error"},
      {"repetition_penalty 0", c(with(R"("repetition_penalty": 0)")), 400, "invalid_request_error"},
      {"n 2", c(with(R"("n": 2)")), 400, "invalid_request_error"},
      {"stop list of 5", c(with(R"("stop": ["a", "b", "c", "d", "e"])")), 400,
       "invalid_request_error"},
      {"stop not a string", c(with(R"("stop": [7])")), 400, "invalid_request_error"},
      {"logprobs 9", c(with(R"("logprobs": 9)")), 400, "invalid_request_error"},
      {"stream not a boolean", c(with(R"("stream": "yes")")), 400, "invalid_request_error"},
      {"stream_options without stream", c(with(R"("stream_options": {"include_usage": true})")),
       400, "invalid_request_error"},
      {"seed string", c(with(R"("seed": "42")")), 400, "invalid_request_error"},
      {"empty messages", chat(msgs("[]")), 400, "invalid_request_error"},
      {"messages not an array", chat(msgs(R"("hi")")), 400, "invalid_request_error"},
      {"message without role", chat(msgs(R"([{"content": "hi"}])")), 400, "invalid_request_error"},
      {"message without content", chat(msgs(R"([{"role": "user"}])")), 400,
       "invalid_request_error"},
      {"unknown role", chat(msgs(R"([{"role": "wizard", "content": "hi"}])")), 400,
       "invalid_request_error"},
      {"content of wrong type", chat(msgs(R"([{"role": "user", "content": 42}])")), 400,
       "invalid_request_error"},
      {"image content part",
       chat(msgs(R"([{"role": "user", "content": [{"type": "image_url"}]}])")), 400,
       "invalid_request_error"},
      {"chat top_logprobs 25",
       chat(
           R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 25})"),
       400, "invalid_request_error"},
      {"prompt over the context", c(R"({"prompt": ")" + long_prompt + R"("})"), 400,
       "invalid_request_error"},
      {"invalid UTF-8 in the prompt", c(std::string("{\"prompt\": \"ab\xff\xfe\xc3(\"}")), 400,
       "invalid_request_error"},
      {"lone surrogate escape", c(R"({"prompt": "\ud800x"})"), 400, "invalid_request_error"},
      {"raw NUL byte in a string", c(std::string("{\"prompt\": \"a\0b\"}", 17)), 400,
       "invalid_request_error"},
      {"deeply nested JSON", c(std::string(100000, '[')), 400, "invalid_request_error"},
      {"deeply nested objects", c(with(R"("x": )" + std::string(5000, '{'))), 400,
       "invalid_request_error"},
      {"10 MB body", c(R"({"prompt": ")" + std::string(10 << 20, 'a') + R"("})"), 413,
       "invalid_request_error"},
      {"unknown route", [](int p) { return post(p, "/v1/nothing-here", R"({"prompt": "hi"})"); },
       404, "not_found_error"},
      {"unknown route GET", [](int p) { return get(p, "/admin"); }, 404, "not_found_error"},
      {"GET on a POST route", [](int p) { return get(p, "/v1/completions"); }, 405,
       "invalid_request_error"},
      {"POST on a GET route", [](int p) { return post(p, "/v1/models", "{}"); }, 405,
       "invalid_request_error"},
      {"wrong API key",
       [](int p) { return post(p, "/v1/completions", R"({"prompt": "hi"})", auth("sk-wrong")); },
       401, "authentication_error"},
      {"missing API key",
       [](int p) { return post(p, "/v1/completions", R"({"prompt": "hi"})", {}); }, 401,
       "authentication_error"},
      {"not a Bearer key",
       [](int p) {
         return post(p, "/v1/completions", R"({"prompt": "hi"})",
                     {{"Authorization", std::string("Basic ") + kKey}});
       },
       401, "authentication_error"},
      {"unknown model", c(R"({"model": "gpt-4", "prompt": "hi"})"), 404, "invalid_request_error"},
      {"huge Content-Length, small body",
       [](int p) {
         RawConnection conn(p);
         conn.send_all(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                   "Authorization: Bearer ") +
                       kKey +
                       "\r\nContent-Type: application/json\r\n"
                       "Content-Length: 99999999999999\r\n\r\n{\"prompt\": \"hi\"}");
         // Refused from the head alone: the body is never waited for.
         const std::string raw = conn.read_until("\"}}");
         Reply r;
         r.status = raw_status(raw);
         r.body = raw_body(raw);
         return r;
       },
       413, "invalid_request_error"},
      {"chunked body over the limit",
       [](int p) {
         RawConnection conn(p);
         std::string head = std::string(
                                "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                "Authorization: Bearer ") +
                            kKey + "\r\nTransfer-Encoding: chunked\r\n\r\n";
         conn.send_all(head);
         const std::string piece(1 << 16, 'a');
         char size_line[32];
         std::snprintf(size_line, sizeof size_line, "%zx\r\n", piece.size());
         for (int i = 0; i < 9 * 16; ++i)  // 9 MiB
           if (!conn.send_all(size_line + piece + "\r\n")) break;
         conn.send_all("0\r\n\r\n");
         const std::string raw = conn.read_until("\"}}");
         Reply r;
         r.status = raw_status(raw);
         r.body = raw_body(raw);
         // The answer says the connection closes (the rest of the body is not read).
         if (raw.find("\r\nConnection: close\r\n") == std::string::npos) r.status = -1;
         return r;
       },
       413, "invalid_request_error"},
  };
  return v;
}

TEST_F(ServerTest, HostileRequestsGetOpenAiErrors) {
  const auto cases = hostile_requests();
  EXPECT_GE(cases.size(), 30u);
  for (const Hostile& h : cases) {
    SCOPED_TRACE(h.name);
    const Reply r = h.send(port());
    EXPECT_EQ(r.status, h.status) << r.body.substr(0, 400);
    const json j = r.parsed();
    ASSERT_TRUE(j.is_object() && j.contains("error"))
        << "not an OpenAI error body: " << r.body.substr(0, 400);
    const json& e = j["error"];
    ASSERT_TRUE(e["message"].is_string());
    EXPECT_FALSE(e["message"].get<std::string>().empty());
    EXPECT_EQ(e["type"], h.type);
    EXPECT_TRUE(e.contains("param"));
    EXPECT_TRUE(e.contains("code"));
    expect_healthy();
  }
  // And the server still serves.
  EXPECT_EQ(post(port(), "/v1/completions", R"({"prompt": "x", "max_tokens": 1})").status, 200);
  EXPECT_EQ(scrape_metric(port(), "shrike_kv_blocks_used"), 0);
}

// Acceptance 5, the raw half: curl's view of the SSE stream.
TEST_F(ServerTest, CurlSeesRawSse) {
  if (std::system("curl --version > /dev/null 2>&1") != 0)
    FAIL() << "the curl binary is needed for this test (apt-get install curl)";
  const std::string cmd =
      "curl -sS -N --max-time 60 -H 'Authorization: Bearer " + std::string(kKey) +
      "' -H 'Content-Type: application/json' -d '{\"messages\": [{\"role\": \"user\", "
      "\"content\": \"hi\"}], \"max_tokens\": 6, \"ignore_eos\": true, \"stream\": true}' "
      "http://127.0.0.1:" +
      std::to_string(port()) + "/v1/chat/completions";
  const CommandResult r = [&] {
    CommandResult out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.out.append(buf, n);
    out.exit_code = WEXITSTATUS(pclose(p));
    return out;
  }();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Events are "data: {json}" lines separated by blank lines, ending with "data: [DONE]".
  EXPECT_NE(r.out.find("data: {"), std::string::npos);
  ASSERT_GE(r.out.size(), 14u);
  EXPECT_EQ(r.out.substr(r.out.size() - 14), "data: [DONE]\n\n");
  const StreamResult sr = collect_stream(r.out, true);
  EXPECT_EQ(sr.finish_reason, "length");
  EXPECT_GE(sr.chunks, 2u);
}

// ---------------------------------------------------------------------------------------------
// Servers of their own for what changes server state: a slower model so requests last long
// enough to interrupt.

class SlowServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("shrike_server_slow_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    model_ = new std::string((*dir_ / "slow.gguf").string());
    setup_error_ = new std::string(synth_model(
        *model_, "--dim 256 --layers 4 --heads 4 --ffn 768 --vocab 512 --context 4096"));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete model_;
    delete setup_error_;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_->empty()) << *setup_error_; }

  static fs::path* dir_;
  static std::string* model_;
  static std::string* setup_error_;
};
fs::path* SlowServerTest::dir_ = nullptr;
std::string* SlowServerTest::model_ = nullptr;
std::string* SlowServerTest::setup_error_ = nullptr;

std::string stream_request(int max_tokens) {
  const std::string body = R"({"prompt": "Once upon a time", "stream": true, "ignore_eos": true,
                               "max_tokens": )" +
                           std::to_string(max_tokens) + "}";
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// --chat-template FILE: the file's Jinja template is recognised like a model's own.
TEST_F(SlowServerTest, ChatTemplateFromAFile) {
  const fs::path tmpl = fs::temp_directory_path() / ("shrike_tmpl_" + std::to_string(getpid()));
  {
    std::ofstream out(tmpl);
    out << "{% for m in messages %}{{ '<start_of_turn>' + m['role'] + '\\n' }}{% endfor %}";
  }
  ServerProcess server;
  // A 64 MiB KV cache, as in every other test of this model: the default (its 4,096-token
  // context 16 times, 1 GiB) takes 40-50 s to allocate under ThreadSanitizer, past start's 60 s
  // once the machine is shared.
  ASSERT_TRUE(server.start(
      {*model_, "--threads", "1", "--kv-cache-mb", "64", "--chat-template", tmpl.string()}))
      << server.log();
  ASSERT_TRUE(ready(server.port())) << server.log();
  EXPECT_NE(server.log().find("chat format gemma"), std::string::npos) << server.log();
  fs::remove(tmpl);
  ServerProcess missing;
  EXPECT_FALSE(missing.start({*model_, "--chat-template", "/nonexistent/template.jinja"}));
  EXPECT_NE(missing.log().find("not a chat format name nor a readable file"), std::string::npos)
      << missing.log();
}

// Acceptance 4: a client that drops mid-stream frees its blocks within a step or so.
TEST_F(SlowServerTest, DisconnectMidStreamFreesBlocks) {
  ServerProcess server;
  ASSERT_TRUE(server.start({*model_, "--threads", "1", "--kv-cache-mb", "64"})) << server.log();
  ASSERT_TRUE(ready(server.port())) << server.log();
  RawConnection conn(server.port());
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(conn.send_all(stream_request(3000)));
  // Wait until a few tokens have arrived: the request is running and holds blocks.
  std::string got;
  while (true) {
    const std::string more = conn.read_until("data: ");
    ASSERT_FALSE(more.empty()) << "stream ended early: " << got;
    got += more;
    size_t events = 0;
    for (size_t p = got.find("data: "); p != std::string::npos; p = got.find("data: ", p + 1))
      ++events;
    if (events >= 4) break;
  }
  EXPECT_GT(scrape_metric(server.port(), "shrike_kv_blocks_used"), 0);
  conn.close_now();
  EXPECT_TRUE(
      eventually([&] { return scrape_metric(server.port(), "shrike_kv_blocks_used") == 0; }, 5))
      << "blocks still in use after the client left";
  EXPECT_TRUE(eventually(
      [&] {
        return scrape_metric(server.port(),
                             R"(shrike_requests_finished_total{reason="cancelled"})") == 1;
      },
      5));
  EXPECT_EQ(scrape_metric(server.port(), R"(shrike_requests_finished_total{reason="length"})"), 0)
      << "the request ran to the end instead of being cancelled";
  EXPECT_EQ(get(server.port(), "/health", {}).status, 200);
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
}

// --kv-type int8-mixed: /metrics shows the cache type's bytes per position, the bytes held
// (blocks plus f16 copies) while a request runs, and nothing once it is gone. int8-mixed knobs
// with another type are refused at start.
TEST_F(SlowServerTest, Int8MixedKvCacheBytesInMetrics) {
  ServerProcess server;
  ASSERT_TRUE(server.start({*model_, "--threads", "1", "--kv-cache-mb", "64", "--kv-type",
                            "int8-mixed", "--kv-fp16-layers", "0", "--kv-heavy", "0.2"}))
      << server.log();
  ASSERT_TRUE(ready(server.port())) << server.log();
  EXPECT_NE(server.log().find("KV cache int8-mixed (sinks 4, window 16, heavy 20%, f16 layers 0)"),
            std::string::npos)
      << server.log();
  // int8-mixed turns the prefix cache off, and /v1/models says so.
  const json o = get(server.port(), "/v1/models").parsed()["data"][0]["shrike"]["serving_options"];
  EXPECT_EQ(o["prefix_cache"], "off");
  EXPECT_EQ(o["kv_type"].get<std::string>().rfind("int8-mixed", 0), 0u);
  // 4 layers of 4 kv heads of 64: layer 0 in f16 (2 x 4 x 64 x 2 bytes), 3 in int8 (2 x 4 x 68).
  EXPECT_EQ(scrape_metric(server.port(), R"(shrike_kv_cache_bytes_per_token{type="int8-mixed"})"),
            2 * 4 * 64 * 2 + 3 * 2 * 4 * (64 + 4));
  RawConnection conn(server.port());
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(conn.send_all(stream_request(3000)));
  std::string got;
  for (size_t events = 0; events < 40;) {
    const std::string more = conn.read_until("data: ");
    ASSERT_FALSE(more.empty()) << "stream ended early: " << got;
    got += more;
    events = 0;
    for (size_t p = got.find("data: "); p != std::string::npos; p = got.find("data: ", p + 1))
      ++events;
  }
  const Reply m = get(server.port(), "/metrics", {});
  ASSERT_EQ(m.status, 200);
  const double copies = metric(m.body, "shrike_kv_cache_f16_copy_bytes");
  EXPECT_GE(copies, 20 * 3 * 2 * 4 * 64 * 2) << "sinks and window of 3 int8 layers";
  EXPECT_GT(metric(m.body, "shrike_kv_cache_tokens_used"), 40);
  EXPECT_GT(metric(m.body, "shrike_kv_cache_bytes_used"), copies);
  conn.close_now();
  EXPECT_TRUE(eventually(
      [&] {
        return scrape_metric(server.port(), "shrike_kv_blocks_used") == 0 &&
               scrape_metric(server.port(), "shrike_kv_cache_bytes_used") == 0 &&
               scrape_metric(server.port(), "shrike_kv_cache_f16_copy_bytes") == 0;
      },
      5));
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
  ServerProcess bad;
  EXPECT_FALSE(bad.start({*model_, "--kv-type", "int8", "--kv-sinks", "2"}));
  EXPECT_NE(bad.log().find("--kv-sinks applies to --kv-type int8-mixed"), std::string::npos)
      << bad.log();
}

// SIGTERM: the running request completes, new ones get 503, the process exits 0.
// The drain timeout is only an upper bound: under ThreadSanitizer on a busy machine the 1500
// tokens took over 60 s.
TEST_F(SlowServerTest, SigtermDrains) {
  ServerProcess server;
  ASSERT_TRUE(
      server.start({*model_, "--threads", "1", "--kv-cache-mb", "64", "--drain-timeout", "600"}))
      << server.log();
  const int port = server.port();
  ASSERT_TRUE(ready(port)) << server.log();
  // Long enough to outlast the checks below; a sanitized server (TSan: ~25 ms a token here)
  // needs fewer tokens for that.
#if defined(SHRIKE_SANITIZED)
  constexpr int kTokens = 600;
#else
  constexpr int kTokens = 1500;
#endif
  Reply running;
  std::thread t([&] {
    running = post(port, "/v1/completions",
                   R"({"prompt": "Once upon a time", "ignore_eos": true, "max_tokens": )" +
                       std::to_string(kTokens) + "}",
                   {});
  });
  ASSERT_TRUE(eventually([&] { return scrape_metric(port, "shrike_requests_running") == 1; }, 10));
  server.signal(SIGTERM);
  EXPECT_TRUE(eventually([&] { return get(port, "/health", {}).status == 503; }, 5));
  const Reply refused = post(port, "/v1/completions", R"({"prompt": "x", "max_tokens": 1})", {});
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.parsed()["error"]["type"], "server_error");
  const bool still_running = scrape_metric(port, "shrike_requests_running") == 1;
  t.join();
  EXPECT_TRUE(still_running) << "the request ended before the drain could be observed; make it "
                                "longer";
  ASSERT_EQ(running.status, 200) << running.body;
  EXPECT_EQ(running.parsed()["usage"]["completion_tokens"], kTokens);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
  EXPECT_NE(server.log().find("draining"), std::string::npos);
}

// A drain that times out cancels what still runs and exits 0 all the same.
TEST_F(SlowServerTest, DrainTimeoutCancelsAndExits) {
  ServerProcess server;
  ASSERT_TRUE(
      server.start({*model_, "--threads", "1", "--kv-cache-mb", "64", "--drain-timeout", "0.3"}))
      << server.log();
  const int port = server.port();
  ASSERT_TRUE(ready(port)) << server.log();
  Reply running;
  std::thread t([&] {
    running = post(port, "/v1/completions",
                   R"({"prompt": "Once upon a time", "ignore_eos": true, "max_tokens": 3500})", {});
  });
  ASSERT_TRUE(eventually([&] { return scrape_metric(port, "shrike_requests_running") == 1; }, 10));
  const auto t0 = std::chrono::steady_clock::now();
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(20), 0) << server.log();
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  // The cut request is told so (or sees the connection close), never a 200 with a full answer.
  EXPECT_NE(running.status, 200) << running.body;
  EXPECT_NE(server.log().find("still running"), std::string::npos) << server.log();
}

// A full queue answers 429 with Retry-After; dropped clients (running and waiting) are cleaned up.
TEST_F(SlowServerTest, QueueFullIs429) {
  ServerProcess server;
  ASSERT_TRUE(server.start(
      {*model_, "--threads", "1", "--kv-cache-mb", "64", "--max-seqs", "1", "--max-queue", "1"}))
      << server.log();
  ASSERT_TRUE(ready(server.port())) << server.log();
  const int port = server.port();
  RawConnection a(port), b(port);
  ASSERT_TRUE(a.send_all(stream_request(3000)));
  ASSERT_TRUE(eventually([&] { return scrape_metric(port, "shrike_requests_running") == 1; }, 10));
  ASSERT_TRUE(b.send_all(stream_request(3000)));
  ASSERT_TRUE(eventually([&] { return scrape_metric(port, "shrike_requests_waiting") == 1; }, 10));
  const Reply c = post(port, "/v1/completions", R"({"prompt": "x", "max_tokens": 1})", {});
  EXPECT_EQ(c.status, 429) << c.body;
  EXPECT_FALSE(c.header("Retry-After").empty());
  EXPECT_EQ(c.parsed()["error"]["type"], "rate_limit_error");
  EXPECT_GE(scrape_metric(port, "shrike_requests_rejected_total"), 1);
  a.close_now();
  b.close_now();
  EXPECT_TRUE(eventually(
      [&] {
        return scrape_metric(port, "shrike_kv_blocks_used") == 0 &&
               scrape_metric(port, "shrike_requests_running") == 0 &&
               scrape_metric(port, "shrike_requests_waiting") == 0;
      },
      10))
      << "requests of dropped clients were not cleaned up";
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
}

}  // namespace
}  // namespace shrike::testing
