// Faults against a real `shrike serve` (issue 18, point 5): the KV pool exhausted by many
// concurrent long requests (preemption, never a crash), an allocation failing while a request is
// admitted (that request fails with an OpenAI error, the server serves the next), and bad or
// changed model files (a truncated file at start-up exits 2 with one line; a file changed on
// disk while serving changes nothing, since the weights were read into memory at start-up).
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics_probe.h"
#include "run_shrike.h"
#include "server_process.h"

namespace shrike::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Reply {
  int status = 0;  // 0: no response
  std::string body;
  json parsed() const { return json::parse(body, nullptr, false); }
};

Reply post(int port, const std::string& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  const auto r = c.Post("/v1/completions", body, "application/json");
  return r ? Reply{r->status, r->body} : Reply{};
}

int health(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10, 0);
  const auto r = c.Get("/health");
  return r ? r->status : 0;
}

// An OpenAI error body of a server error.
void expect_server_error(const Reply& r, const std::string& phrase) {
  EXPECT_GE(r.status, 500) << r.body;
  const json j = r.parsed();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_EQ(j["error"]["type"], "server_error") << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(phrase), std::string::npos) << r.body;
}

class FaultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("shrike_faults_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    model_ = new std::string((*dir_ / "tiny.gguf").string());
    const auto r = run_shrike(
        "synth --dim 64 --layers 2 --heads 4 --ffn 128 --vocab 512 --context 256 --type f32 -o " +
        *model_);
    setup_error_ = new std::string(r.exit_code == 0 ? "" : "shrike synth failed: " + r.err);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete model_;
    delete setup_error_;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_->empty()) << *setup_error_; }

  static void start(ServerProcess& s, std::vector<std::string> args) {
    ASSERT_TRUE(s.start(args)) << s.log();
    ASSERT_TRUE(eventually([&] { return health(s.port()) == 200; }, 60)) << s.log();
  }
  static void stop(ServerProcess& s) {
    s.signal(SIGTERM);
    EXPECT_EQ(s.wait_exit(30), 0) << s.log();
  }

  static fs::path* dir_;
  static std::string* model_;
  static std::string* setup_error_;
};
fs::path* FaultsTest::dir_ = nullptr;
std::string* FaultsTest::model_ = nullptr;
std::string* FaultsTest::setup_error_ = nullptr;

// 16 concurrent requests of 100 tokens each need ~7 blocks apiece; the pool has 12. The
// scheduler preempts and recomputes: every request completes in full, none errs, the blocks
// all come back. A request that needs more blocks than the pool has fails alone, cleanly.
TEST_F(FaultsTest, KvPoolExhaustedUnderLoadPreemptsNeverCrashes) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(
      start(server, {*model_, "--threads", "1", "--kv-blocks", "12", "--max-seqs", "16"}));
  const int port = server.port();
  constexpr int kClients = 16, kTokens = 100;
  std::vector<Reply> replies(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      replies[size_t(i)] = post(
          port, R"({"prompt": "Once upon a time there was )" + std::to_string(i) +
                    R"(", "ignore_eos": true, "max_tokens": )" + std::to_string(kTokens) + "}");
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(replies[size_t(i)].status, 200) << replies[size_t(i)].body;
    EXPECT_EQ(replies[size_t(i)].parsed()["usage"]["completion_tokens"], kTokens);
  }
  EXPECT_GT(scrape(port, "shrike_preemptions_total"), 0) << "the pool was never exhausted";
  EXPECT_EQ(scrape(port, R"(shrike_requests_finished_total{reason="error")"), 0);
  EXPECT_TRUE(eventually([&] { return scrape(port, "shrike_kv_blocks_used") == 0; }, 5));
  // 12 blocks of 16 hold 192 positions; this request needs 233.
  const Reply too_big = post(port, R"({"prompt": "a b c", "ignore_eos": true, "max_tokens": 230})");
  expect_server_error(too_big, "more KV cache than the server has");
  EXPECT_EQ(health(port), 200);
  EXPECT_EQ(post(port, R"({"prompt": "Once", "max_tokens": 2})").status, 200);
  stop(server);
}

// With the test-only fault point armed, every 3rd admission throws std::bad_alloc: exactly
// those requests fail with a 500 and an OpenAI error body (a stream: an error event, then
// [DONE]); every other request is served, and the server stays healthy.
TEST_F(FaultsTest, AllocationFailureFailsOnlyThatRequest) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server, {*model_, "--threads", "1", "--test-fail-admission", "3"}));
  const int port = server.port();
  int failed = 0, served = 0;
  for (int i = 0; i < 9; ++i) {
    const Reply r = post(port, R"({"prompt": "Once", "max_tokens": 4})");
    if (r.status == 200) {
      ++served;
      EXPECT_EQ(r.parsed()["usage"]["completion_tokens"], 4);
    } else {
      ++failed;
      expect_server_error(r, "out of memory");
    }
    EXPECT_EQ(health(port), 200);
  }
  EXPECT_EQ(failed, 3);
  EXPECT_EQ(served, 6);
  int stream_errors = 0;
  for (int i = 0; i < 3; ++i) {
    const Reply r = post(port, R"({"prompt": "Once", "max_tokens": 4, "stream": true})");
    ASSERT_EQ(r.status, 200) << "a stream's status is sent before the engine admits it";
    const size_t done = r.body.rfind("data: [DONE]");
    EXPECT_NE(done, std::string::npos) << r.body;
    if (r.body.find("\"error\"") != std::string::npos) {
      ++stream_errors;
      EXPECT_NE(r.body.find("out of memory"), std::string::npos) << r.body;
      EXPECT_LT(r.body.find("\"error\""), done) << r.body;
    }
  }
  EXPECT_EQ(stream_errors, 1);
  EXPECT_EQ(scrape(port, R"(shrike_requests_finished_total{reason="error")"), 4);
  EXPECT_TRUE(eventually([&] { return scrape(port, "shrike_kv_blocks_used") == 0; }, 5));
  stop(server);
}

// A model file cut short (a download that stopped) at start-up: exit code 2 and one line on
// stderr naming the file, never a crash or a half-started server.
TEST_F(FaultsTest, TruncatedModelAtStartExits2WithOneLine) {
  const auto size = fs::file_size(*model_);
  for (const uintmax_t keep : {uintmax_t(100), size / 2, size - 1}) {
    SCOPED_TRACE(keep);
    const fs::path cut = *dir_ / ("cut_" + std::to_string(keep) + ".gguf");
    fs::copy_file(*model_, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    const CommandResult r = run_shrike("serve " + cut.string() + " --port 0 --threads 1");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
    EXPECT_NE(r.err.find(cut.string()), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// The weights are read into memory at start-up: truncating and overwriting the file while
// serving changes no answer (greedy outputs stay identical) and crashes nothing.
TEST_F(FaultsTest, ModelFileChangedWhileServingChangesNothing) {
  const fs::path copy = *dir_ / "served.gguf";
  fs::copy_file(*model_, copy, fs::copy_options::overwrite_existing);
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server, {copy.string(), "--threads", "1"}));
  const int port = server.port();
  const std::string req = R"({"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0})";
  const Reply before = post(port, req);
  ASSERT_EQ(before.status, 200) << before.body;
  fs::resize_file(copy, 10);
  {
    std::ofstream out(copy, std::ios::binary | std::ios::trunc);
    out << std::string(4096, '\xff');
  }
  const Reply after = post(port, req);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.parsed()["choices"][0]["text"], before.parsed()["choices"][0]["text"]);
  EXPECT_EQ(health(port), 200);
  stop(server);
}

}  // namespace
}  // namespace shrike::testing
