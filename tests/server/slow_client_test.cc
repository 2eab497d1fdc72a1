// Slow and hostile clients against a real `shrike serve` (issue 18, point 4), over real sockets,
// with small limits so each case takes seconds: a head sent a byte at a time and a body that
// never finishes get 408 at their whole-request deadline; heads over the size and header-count
// limits are refused; idle keep-alive connections are closed; a thousand half-head connections
// neither starve a well-behaved client nor pass --max-connections; a stream that is never read
// is cut at the write timeout and its request cancelled, its KV blocks freed; a stream holds no
// worker, and its connection is kept alive after it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
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
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A 2-token completion on a new connection: its status (0: none) and how long it took.
std::pair<int, double> quick_completion(int port) {
  const auto t0 = Clock::now();
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(20, 0);
  c.set_connection_timeout(20, 0);
  const auto r = c.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 2})",
                        "application/json");
  return {r ? r->status : 0, since(t0)};
}

// The OpenAI error in a raw response, with its status.
struct RawError {
  int status = 0;
  std::string code;
  bool closes = false;  // the answer says Connection: close
};
RawError raw_error(const std::string& raw) {
  RawError e;
  e.status = raw_status(raw);
  const json j = json::parse(raw_body(raw), nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"]["code"].is_string())
    e.code = j["error"]["code"];
  e.closes = raw.find("\r\nConnection: close\r\n") != std::string::npos;
  return e;
}

std::string synth_model(const fs::path& path, const std::string& shape) {
  const auto r = run_shrike("synth " + shape + " --type f32 -o " + path.string());
  return r.exit_code == 0 ? std::string() : "shrike synth failed: " + r.err;
}

class SlowClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("shrike_slow_client_test_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    setup_error_ = new std::string(synth_model(
        *dir_ / "tiny.gguf", "--dim 64 --layers 2 --heads 4 --ffn 128 --vocab 512 --context 256"));
    // Slow enough (a few ms a token on one thread) that a long request is still running while
    // a test does something to its connection.
    if (setup_error_->empty())
      *setup_error_ =
          synth_model(*dir_ / "slow.gguf",
                      "--dim 256 --layers 4 --heads 4 --ffn 768 --vocab 512 --context 4096");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete setup_error_;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_->empty()) << *setup_error_; }

  // A server with limits small enough for tests; `more` adds or overrides options.
  void start(ServerProcess& s, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {(*dir_ / "tiny.gguf").string(),
                                     "--threads",
                                     "1",
                                     "--header-timeout",
                                     "1",
                                     "--body-timeout",
                                     "1",
                                     "--keep-alive-timeout",
                                     "1",
                                     "--max-header-kb",
                                     "4",
                                     "--max-headers",
                                     "20",
                                     "--max-body-mb",
                                     "1"};
    for (size_t i = 0; i + 1 < more.size(); i += 2) {  // flag, value: replaces a default
      const auto at = std::find(args.begin(), args.end(), more[i]);
      if (at != args.end())
        *(at + 1) = more[i + 1];
      else
        args.insert(args.end(), {more[i], more[i + 1]});
    }
    ASSERT_TRUE(s.start(args)) << s.log();
    ASSERT_TRUE(eventually([&] { return quick_completion(s.port()).first == 200; }, 60)) << s.log();
  }
  static void stop(ServerProcess& s) {
    s.signal(SIGTERM);
    EXPECT_EQ(s.wait_exit(30), 0) << s.log();
  }

  static fs::path* dir_;
  static std::string* setup_error_;
};
fs::path* SlowClientTest::dir_ = nullptr;
std::string* SlowClientTest::setup_error_ = nullptr;

// A head trickled a byte every 50 ms (it would take ~4 s) is answered 408 at the 1 s header
// deadline, however recently its last byte came; a well-behaved client is served meanwhile.
TEST_F(SlowClientTest, HeadSentAByteAtATimeGets408AtItsDeadline) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server, {"--http-threads", "1"}));
  RawConnection conn(server.port());
  ASSERT_TRUE(conn.ok());
  std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 8; ++i) head += "X-Slow-" + std::to_string(i) + ": aaaa\r\n";
  const auto t0 = Clock::now();
  std::thread well_behaved_during([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto [status, seconds] = quick_completion(server.port());
    EXPECT_EQ(status, 200);
    EXPECT_LT(seconds, 2.0) << "the only worker was held by the slow head";
  });
  std::string raw;
  for (char c : head) {
    if (!conn.send_all(std::string(1, c))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (since(t0) > 1.5) break;  // the answer is due by now
  }
  raw = conn.read_until("}}");
  const double took = since(t0);
  well_behaved_during.join();
  const RawError e = raw_error(raw);
  EXPECT_EQ(e.status, 408) << raw;
  EXPECT_EQ(e.code, "request_timeout") << raw;
  EXPECT_TRUE(e.closes);
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 3.5);
  EXPECT_GE(scrape(server.port(), R"(shrike_http_connections_closed_total{reason="timeout")"), 1);
  stop(server);
}

// A body announced and never finished: 408 one body-timeout after the head, not per read.
TEST_F(SlowClientTest, BodyThatNeverFinishesGets408) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server, {"--http-threads", "1"}));
  RawConnection conn(server.port());
  ASSERT_TRUE(conn.send_all(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\""));
  const auto t0 = Clock::now();
  std::thread keep_trickling([&] {  // a byte every 200 ms: each read would succeed
    for (int i = 0; i < 12 && since(t0) < 2.5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!conn.send_all(" ")) break;
    }
  });
  const std::string raw = conn.read_until("}}");
  const double took = since(t0);
  keep_trickling.join();
  const RawError e = raw_error(raw);
  EXPECT_EQ(e.status, 408) << raw;
  EXPECT_NE(raw.find("body"), std::string::npos) << raw;
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 3.5);
  EXPECT_EQ(quick_completion(server.port()).first, 200);
  stop(server);
}

// Heads over the limits are refused at once, with an OpenAI error and the connection closed.
TEST_F(SlowClientTest, HeadLimitsAreRefused) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server));
  struct Case {
    const char* name;
    std::string bytes;
    int status;
  };
  std::string many = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 25; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  const Case cases[] = {
      {"head over --max-header-kb",
       "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(5000, 'a') + "\r\n\r\n", 431},
      {"more than --max-headers lines", many + "\r\n", 431},
      {"request line over the head limit",
       "GET /" + std::string(5000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
      {"Content-Length over --max-body-mb",
       "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", 413},
      {"Content-Length and chunked",
       "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
       "Transfer-Encoding: chunked\r\n\r\n{}",
       400},
      {"not HTTP", "HELLO\r\n\r\n", 400},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawConnection conn(server.port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(conn.send_all(c.bytes));
    const std::string raw = conn.read_until("}}");
    const RawError e = raw_error(raw);
    EXPECT_EQ(e.status, c.status) << raw;
    EXPECT_FALSE(e.code.empty()) << raw;
    EXPECT_TRUE(e.closes) << raw;
    EXPECT_LT(since(t0), 0.9) << "refused from the head, not at a deadline";
  }
  EXPECT_GE(scrape(server.port(), R"(shrike_http_connections_closed_total{reason="rejected")"), 6);
  // A head just under the limits is served.
  RawConnection ok(server.port());
  ASSERT_TRUE(ok.send_all("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(3500, 'a') +
                          "\r\n\r\n"));
  EXPECT_EQ(raw_status(ok.read_until("}")), 200);
  stop(server);
}

// The front's framer is the one authority on where a request ends (issue 31): a POST with
// neither Content-Length nor Transfer-Encoding has an empty body (its 400 says so) and the
// request pipelined after it is answered, not read as its body; whitespace before a header's colon
// is a 400; a header line past httplib's 8 KiB line limit inside a head the limit allows is one
// 431 with an OpenAI error.
TEST_F(SlowClientTest, OneFramingForEveryRequest) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server, {"--max-header-kb", "16"}));
  {
    RawConnection conn(server.port());
    ASSERT_TRUE(conn.send_all(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n{\"prompt\":\"a\",\"max_tokens\":1}"
        "GET /live HTTP/1.1\r\nHost: x\r\n\r\n"));
    // The JSON text after the empty-bodied POST is not a request line: the second answer is the
    // front's 400 for it, after the POST's own 400; nothing is taken as a body.
    const std::string raw = conn.read_until("request line");
    EXPECT_EQ(raw_status(raw), 400) << raw;
    EXPECT_NE(raw.find("HTTP/1.1 400", 12), std::string::npos) << raw;
  }
  {
    RawConnection conn(server.port());
    ASSERT_TRUE(
        conn.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /live HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string raw = conn.read_until("alive");
    EXPECT_EQ(raw_status(raw), 400) << raw;
    EXPECT_NE(raw.find("\"alive\""), std::string::npos) << "the pipelined GET was lost: " << raw;
  }
  {
    RawConnection conn(server.port());
    ASSERT_TRUE(
        conn.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length : 22\r\n\r\n"
                      "{\"prompt\":\"a\",\"n\":1}"));
    const RawError e = raw_error(conn.read_until("}}"));
    EXPECT_EQ(e.status, 400);
    EXPECT_TRUE(e.closes);
  }
  {
    RawConnection conn(server.port());
    ASSERT_TRUE(conn.send_all("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " +
                              std::string(9000, 'a') + "\r\n\r\nGET /live HTTP/1.1\r\n\r\n"));
    const std::string raw = conn.read_until("}}");
    const RawError e = raw_error(raw);
    EXPECT_EQ(e.status, 431) << raw;
    EXPECT_FALSE(e.code.empty()) << raw;
    EXPECT_EQ(raw.find("HTTP/1.1", 12), std::string::npos) << "one answer only: " << raw;
  }
  stop(server);
}

// Expect: 100-continue is answered by the front, so curl-style clients send their body at once.
TEST_F(SlowClientTest, ExpectContinueIsAnswered) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server));
  const std::string body = R"({"prompt": "Once", "max_tokens": 2})";
  RawConnection conn(server.port());
  ASSERT_TRUE(
      conn.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                    "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n"));
  const std::string interim = conn.read_until("\r\n\r\n");
  EXPECT_EQ(interim.rfind("HTTP/1.1 100 Continue\r\n", 0), 0u) << interim;
  ASSERT_TRUE(conn.send_all(body));
  const std::string raw = conn.read_until("}}");
  EXPECT_EQ(raw_status(raw), 200) << raw;
  EXPECT_EQ(raw.find("100 Continue"), std::string::npos) << "a second interim answer: " << raw;
  stop(server);
}

// Keep-alive: pipelined requests are answered in order on one connection, which the server
// closes after --keep-alive-timeout of silence.
TEST_F(SlowClientTest, KeepAliveAndIdleTimeout) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server));
  RawConnection conn(server.port());
  ASSERT_TRUE(
      conn.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET /live HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string both = conn.read_until("alive\"}");
  EXPECT_NE(both.find("\"ok\""), std::string::npos) << both;
  EXPECT_LT(both.find("\"ok\""), both.find("alive")) << both;
  const auto t0 = Clock::now();
  const std::string after = conn.read_until("never");  // until the server closes
  EXPECT_TRUE(after.empty()) << after;
  EXPECT_GE(since(t0), 0.8);
  EXPECT_LT(since(t0), 3.0);
  stop(server);
}

// One response with a Content-Length body from `conn`: head and body; empty when none came.
std::string read_sized_response(RawConnection& conn) {
  std::string r = conn.read_until("\r\n\r\n");
  const size_t head_end = r.find("\r\n\r\n");
  const size_t cl = r.find("Content-Length: ");
  if (head_end == std::string::npos || cl == std::string::npos) return r;
  const size_t need = head_end + 4 + size_t(std::atoll(r.c_str() + cl + 16));
  while (r.size() < need) {
    const std::string more = conn.read_some();
    if (more.empty()) break;
    r += more;
  }
  return r;
}

// Answers the engine finished (not streamed) keep their connection alive until its keep-alive
// count: the 1,000th says "Connection: close" and the server closes after it, so a client
// never sends a request into a connection the server is closing (reset, lost request).
TEST_F(SlowClientTest, WholeAnswersCloseAtTheKeepAliveLimit) {
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(start(server));
  RawConnection conn(server.port());
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 1})";
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  for (int i = 1; i <= 1000; ++i) {
    ASSERT_TRUE(conn.send_all(request)) << "request " << i;
    const std::string r = read_sized_response(conn);
    ASSERT_EQ(raw_status(r), 200) << "request " << i << ": " << r;
    const bool closes = r.find("\r\nConnection: close\r\n") != std::string::npos;
    ASSERT_EQ(closes, i == 1000) << "request " << i << ": " << r;
  }
  EXPECT_TRUE(conn.read_until("never").empty()) << "the connection stayed open";
  stop(server);
}

// Raises this process's open-file limit so it can hold `n` connections; the number it can hold.
size_t allow_open_files(size_t n) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < n + 64) {
    r.rlim_cur = std::min<rlim_t>(r.rlim_max, rlim_t(n + 64));
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur > 64 ? std::min<size_t>(n, size_t(r.rlim_cur) - 64) : 0;
}

// A thousand connections holding half a head, with 2 workers and room for 200 connections:
// the oldest waiting ones are closed to make room, none holds a worker, and a well-behaved
// client's requests all go through at once (before the front, 200 such connections starved
// every other client of 96 workers).
TEST_F(SlowClientTest, HalfHeadConnectionsDoNotStarveOthers) {
  const size_t n = allow_open_files(1000);
  if (n < 500) GTEST_SKIP() << "this process may open only " << n << " files; the test needs 500";
  ServerProcess server;
  ASSERT_NO_FATAL_FAILURE(
      start(server, {"--http-threads", "2", "--max-connections", "200", "--header-timeout", "30"}));
  std::vector<std::unique_ptr<RawConnection>> hostile;
  for (size_t i = 0; i < n; ++i) {
    hostile.push_back(std::make_unique<RawConnection>(server.port()));
    if (hostile.back()->ok())
      hostile.back()->send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\n");
  }
  ASSERT_TRUE(eventually(
      [&] {
        return scrape(server.port(), R"(shrike_http_connections_closed_total{reason="evicted")") >=
               double(n - 200);
      },
      10))
      << "connections beyond --max-connections were not closed";
  double slowest = 0;
  for (int i = 0; i < 20; ++i) {
    const auto [status, seconds] = quick_completion(server.port());
    EXPECT_EQ(status, 200);
    slowest = std::max(slowest, seconds);
  }
  EXPECT_LT(slowest, 1.0) << "a well-behaved client waited behind half-head connections";
  EXPECT_LE(scrape(server.port(), "shrike_http_connections_open"), 200);
  hostile.clear();
  EXPECT_EQ(quick_completion(server.port()).first, 200);
  stop(server);
}

// With every connection busy being answered, a new one is refused with 503 rather than queued.
TEST_F(SlowClientTest, NewConnectionRefusedWhenAllAreBeingAnswered) {
  ServerProcess server;
  ASSERT_TRUE(server.start({(*dir_ / "slow.gguf").string(), "--threads", "1", "--max-connections",
                            "2", "--http-threads", "2", "--kv-cache-mb", "64"}))
      << server.log();
  const int port = server.port();
  ASSERT_TRUE(eventually([&] { return quick_completion(port).first == 200; }, 60));
  const std::string body =
      R"({"prompt": "Once upon a time", "stream": true, "ignore_eos": true, "max_tokens": 600})";
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  // Two long streams, each holding a worker (and a connection) while it runs; its first event
  // says it is being answered.
  RawConnection a(port), b(port);
  ASSERT_TRUE(a.send_all(req));
  ASSERT_TRUE(b.send_all(req));
  std::string got_a = a.read_until("data: "), got_b = b.read_until("data: ");
  ASSERT_EQ(raw_status(got_a), 200) << got_a;
  ASSERT_EQ(raw_status(got_b), 200) << got_b;
  RawConnection c(port);
  ASSERT_TRUE(c.ok());
  const RawError e = raw_error(c.read_until("}}"));
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.code, "too_many_connections");
  // Both streams go on to their end; then there is room again.
  got_a += a.read_until("[DONE]");
  got_b += b.read_until("[DONE]");
  EXPECT_NE(got_a.find("data: [DONE]"), std::string::npos);
  EXPECT_NE(got_b.find("data: [DONE]"), std::string::npos);
  a.close_now();
  b.close_now();
  EXPECT_TRUE(eventually([&] { return quick_completion(port).first == 200; }, 10));
  EXPECT_GE(scrape(port, R"(shrike_http_connections_closed_total{reason="refused")"), 1);
  stop(server);
}

// A stream request on a socket with a small receive buffer (set before connecting, so the
// window fills after a few KiB) that the test never reads: long chunks (5 alternatives per token)
// fill the buffers within a few hundred tokens, and the worker's writes then wait. The socket, or
// -1 when it could not connect or send.
int open_unread_stream(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string body =
      R"({"prompt": "Once upon a time", "stream": true, "ignore_eos": true, "logprobs": 5,
          "max_tokens": 4000})";
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      send(fd, req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// A stream whose client never reads: once the socket buffers are full, the write waits
// --write-timeout and fails; the request is cancelled and its KV blocks freed long before it
// would have finished (one worker streams, the other answers /metrics).
TEST_F(SlowClientTest, StreamNeverReadIsCancelledAtTheWriteTimeout) {
  const fs::path slow = *dir_ / "slow.gguf";
  ServerProcess server;
  ASSERT_TRUE(
      server.start({slow.string(), "--threads", "1", "--write-timeout", "1", "--http-threads", "2",
                    "--kv-cache-mb", "64", "--send-buffer-kb", "16"}))
      << server.log();
  const int port = server.port();
  ASSERT_TRUE(eventually([&] { return quick_completion(port).first == 200; }, 60));
  const int fd = open_unread_stream(port);
  ASSERT_GE(fd, 0);
  const double finished_before = scrape(port, R"(shrike_requests_finished_total{reason="length")");
  ASSERT_TRUE(eventually([&] { return scrape(port, "shrike_requests_running") == 1; }, 10));
  const auto t0 = Clock::now();
  EXPECT_TRUE(eventually(
      [&] {
        return scrape(port, R"(shrike_requests_finished_total{reason="cancelled")") == 1 &&
               scrape(port, "shrike_kv_blocks_used") == 0;
      },
      60))
      << "the unread stream was not cancelled";
  EXPECT_EQ(scrape(port, R"(shrike_requests_finished_total{reason="length")"), finished_before)
      << "the request ran to its end: make it longer or the model slower";
  std::printf("unread stream cancelled %.1f s after it started\n", since(t0));
  EXPECT_EQ(quick_completion(port).first, 200);
  close(fd);
  stop(server);
}

// A stream holds no worker (stream_pump.h): with two HTTP workers, twenty unread streams (their
// writes waiting for room) leave both free, so /v1/models, probes and a completion on the same
// model answer at once. Before the pump each stream held a worker until it ended.
TEST_F(SlowClientTest, StreamsHoldNoWorker) {
  const fs::path slow = *dir_ / "slow.gguf";
  ServerProcess server;
  ASSERT_TRUE(
      server.start({slow.string(), "--threads", "1", "--write-timeout", "30", "--http-threads", "2",
                    "--max-seqs", "4", "--kv-cache-mb", "64", "--send-buffer-kb", "16"}))
      << server.log();
  const int port = server.port();
  ASSERT_TRUE(eventually([&] { return quick_completion(port).first == 200; }, 60));
  std::vector<int> streams;
  for (int i = 0; i < 20; ++i) {
    streams.push_back(open_unread_stream(port));
    ASSERT_GE(streams.back(), 0);
  }
  ASSERT_TRUE(eventually([&] { return scrape(port, "shrike_requests_running") == 4; }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the buffers fill; writes wait
  for (const char* path : {"/v1/models", "/health", "/live", "/metrics"}) {
    RawConnection c(port);
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.send_all(std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string raw = c.read_until("\r\n\r\n");
    EXPECT_EQ(raw_status(raw), 200) << path << ": " << raw;
    EXPECT_LT(since(t0), 1.0) << path << " waited for a worker";
  }
  EXPECT_EQ(scrape(port, "shrike_requests_running"), 4) << "the unread streams ended early";
  for (const int fd : streams) close(fd);
  // Closed streams are cancelled (the pump sees the hang-up), their blocks freed.
  EXPECT_TRUE(eventually(
      [&] {
        return scrape(port, "shrike_requests_running") == 0 &&
               scrape(port, "shrike_requests_waiting") == 0;
      },
      30))
      << server.log();
  stop(server);
}

// Two models, two HTTP workers: a burst on one (40 streams whose client never reads, then 40
// non-streaming requests it never reads either, all waiting in that model's queue or running)
// holds no worker, so the other model and /v1/models answer at once (issue 31: with two models,
// requests to the idle one waited 4-5.6 s while 64 streams ran on the other).
TEST_F(SlowClientTest, ABurstOnOneModelDoesNotDelayAnother) {
  ServerProcess server;
  ASSERT_TRUE(server.start({"busy=" + (*dir_ / "slow.gguf").string(),
                            "idle=" + (*dir_ / "tiny.gguf").string(), "--threads", "1",
                            "--write-timeout", "30", "--http-threads", "2", "--max-seqs", "4",
                            "--kv-memory", "128", "--send-buffer-kb", "16"}))
      << server.log();
  const int port = server.port();
  const auto idle_completion = [&] {
    const auto t0 = Clock::now();
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(20, 0);
    const auto r = c.Post("/v1/completions",
                          R"({"model": "idle", "prompt": "Once upon a time", "max_tokens": 4})",
                          "application/json");
    return std::pair<int, double>{r ? r->status : 0, since(t0)};
  };
  ASSERT_TRUE(eventually([&] { return idle_completion().first == 200; }, 60)) << server.log();
  std::vector<std::unique_ptr<RawConnection>> burst;
  for (const bool stream : {true, false})
    for (int i = 0; i < 40; ++i) {
      const std::string body = std::string(R"({"model": "busy", "prompt": "Once upon a time",)") +
                               R"( "ignore_eos": true, "max_tokens": 3000, "stream": )" +
                               (stream ? "true" : "false") + "}";
      burst.push_back(std::make_unique<RawConnection>(port));
      ASSERT_TRUE(
          burst.back()->send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\n\r\n" + body));
    }
  ASSERT_TRUE(eventually(
      [&] {
        return scrape(port, R"(shrike_requests_running{model="busy"})") == 4 &&
               scrape(port, R"(shrike_requests_waiting{model="busy"})") == 76;
      },
      20))
      << "the burst is not all in the busy model's engine";
  for (int i = 0; i < 5; ++i) {
    const auto [status, seconds] = idle_completion();
    EXPECT_EQ(status, 200);
    EXPECT_LT(seconds, 2.0) << "the idle model waited behind the busy one's burst";
  }
  RawConnection models(port);
  ASSERT_TRUE(models.send_all("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(raw_status(models.read_until("\r\n\r\n")), 200);
  burst.clear();  // the clients go: their requests are cancelled
  EXPECT_TRUE(eventually(
      [&] { return scrape(port, R"(shrike_requests_running{model="busy"})") == 0; }, 30));
  stop(server);
}

// A connection goes back to keep-alive after its stream: the request pipelined behind a stream
// (sent with it, in one write) is answered after the stream's last chunk, on the same connection,
// and so is one sent after it; a stream on a "Connection: close" request ends its connection.
TEST_F(SlowClientTest, StreamConnectionsAreKeptAlive) {
  ServerProcess server;
  start(server);
  const int port = server.port();
  const std::string body = R"({"prompt": "Once upon a time", "stream": true, "max_tokens": 5})";
  const auto stream_request = [&](const std::string& extra) {
    return "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + extra +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  RawConnection c(port);
  ASSERT_TRUE(c.send_all(stream_request("") + "GET /live HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string first = c.read_until("\"alive\"}");
  EXPECT_EQ(raw_status(first), 200) << first;
  const size_t end = first.find("data: [DONE]\n\n\r\n0\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << "no complete chunked stream: " << first;
  EXPECT_EQ(raw_status(first.substr(first.find("HTTP/1.1", end))), 200) << first;
  ASSERT_TRUE(c.send_all(stream_request("")));
  const std::string second = c.read_until("0\r\n\r\n");
  EXPECT_EQ(raw_status(second), 200) << second;
  EXPECT_NE(second.find("data: [DONE]"), std::string::npos) << second;

  RawConnection closing(port);
  ASSERT_TRUE(closing.send_all(stream_request("Connection: close\r\n")));
  const std::string last = closing.read_until("\x01");  // to the server's close
  EXPECT_NE(last.find("data: [DONE]\n\n\r\n0\r\n\r\n"), std::string::npos) << last;
  EXPECT_NE(last.find("Connection: close"), std::string::npos) << last;
  stop(server);
}

}  // namespace
}  // namespace shrike::testing
