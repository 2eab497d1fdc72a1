// The connection front's framing (server/request_framer.h): where a request ends, fed whole and
// a byte at a time, and every limit and malformation it refuses.
#include "server/request_framer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace shrike::server {
namespace {

FrameLimits small_limits() {
  FrameLimits l;
  l.max_head_bytes = 512;
  l.max_headers = 8;
  l.max_body_bytes = 100;
  return l;
}

// Feeds `bytes` whole, then a byte at a time; both must agree. Returns the final state and the
// buffer as the framer left it (an Expect line removed).
struct Fed {
  FrameState state;
  size_t end = 0;
  int status = 0;
  std::string buf;
};
Fed feed(const std::string& bytes, FrameLimits limits = small_limits()) {
  RequestFramer whole(limits);
  Fed a;
  a.buf = bytes;
  a.state = whole.advance(a.buf);
  a.end = whole.request_end();
  a.status = whole.error_status();

  RequestFramer trickle(limits);
  std::string buf;
  FrameState s = FrameState::NeedHead;
  for (char c : bytes) {
    buf += c;
    s = trickle.advance(buf);
    if (s == FrameState::Complete || s == FrameState::Invalid) break;
  }
  EXPECT_EQ(s, a.state) << "fed a byte at a time";
  if (s == FrameState::Complete) {
    EXPECT_EQ(trickle.request_end(), a.end);
  }
  if (s == FrameState::Invalid) {
    EXPECT_EQ(trickle.error_status(), a.status);
  }
  return a;
}

const std::string kGet = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

TEST(RequestFramer, HeadWithoutBody) {
  const Fed f = feed(kGet);
  EXPECT_EQ(f.state, FrameState::Complete);
  EXPECT_EQ(f.end, kGet.size());
  // A POST without Content-Length or chunked coding has no body (as httplib reads it).
  const std::string post = "POST /v1/completions HTTP/1.1\r\n\r\n";
  EXPECT_EQ(feed(post).state, FrameState::Complete);
}

TEST(RequestFramer, ContentLengthBodyAndPipelining) {
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-length: 5\r\n\r\nhello";
  const Fed f = feed(req + kGet);  // the next request follows at once
  EXPECT_EQ(f.state, FrameState::Complete);
  EXPECT_EQ(f.end, req.size());
  RequestFramer r(small_limits());
  std::string partial = req.substr(0, req.size() - 1);
  EXPECT_EQ(r.advance(partial), FrameState::NeedBody);
  std::string head_only = req.substr(0, req.size() - 5);
  RequestFramer h(small_limits());
  EXPECT_EQ(h.advance(head_only), FrameState::NeedBody);
}

TEST(RequestFramer, ChunkedBody) {
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n";
  const Fed f = feed(req + kGet);
  EXPECT_EQ(f.state, FrameState::Complete);
  EXPECT_EQ(f.end, req.size());
}

TEST(RequestFramer, ExpectContinueIsAnsweredByTheFrontAndRemoved) {
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  RequestFramer r(small_limits());
  std::string buf = req;
  EXPECT_EQ(r.advance(buf), FrameState::NeedBody);
  EXPECT_TRUE(r.take_continue());
  EXPECT_FALSE(r.take_continue());
  EXPECT_EQ(buf.find("Expect"), std::string::npos) << buf;
  buf += "{}";
  EXPECT_EQ(r.advance(buf), FrameState::Complete);
  EXPECT_EQ(r.request_end(), buf.size());
  // No body announced: nothing to continue.
  RequestFramer g(small_limits());
  std::string get = "GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n";
  EXPECT_EQ(g.advance(get), FrameState::Complete);
  EXPECT_FALSE(g.take_continue());
}

TEST(RequestFramer, BareLfHeaderLinesAreSkippedLikeHttplib) {
  // httplib skips a header line that ends in a bare LF; the head still ends at CRLF CRLF.
  const std::string req = "GET / HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n";
  const Fed f = feed(req);
  EXPECT_EQ(f.state, FrameState::Complete);
  EXPECT_EQ(f.end, req.size());
}

TEST(RequestFramer, LimitsAndMalformations) {
  struct Case {
    const char* name;
    std::string bytes;
    int status;
  };
  std::string many_headers = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many_headers += "X-" + std::to_string(i) + ": v\r\n";
  const Case cases[] = {
      {"head over the limit", "GET / HTTP/1.1\r\nX-Big: " + std::string(600, 'a') + "\r\n\r\n",
       431},
      {"head over the limit, unfinished", "GET / HTTP/1.1\r\nX-Big: " + std::string(600, 'a'), 431},
      {"too many header lines", many_headers + "\r\n", 431},
      {"request line too long", "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"malformed request line", "GARBAGE\r\n\r\n", 400},
      {"lower-case method", "get / HTTP/1.1\r\n\r\n", 400},
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\n", 400},
      {"Content-Length not a number", "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
      {"negative Content-Length", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"conflicting Content-Length",
       "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"Content-Length and chunked",
       "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"unsupported Transfer-Encoding", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
      {"Content-Length over the body limit", "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413},
      {"chunks over the body limit",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + std::string(64, 'a') +
           "\r\n40\r\n",
       413},
      {"bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"chunk without CRLF", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", 400},
      {"whitespace before the colon", "POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\nabc", 400},
      {"tab before the colon", "GET / HTTP/1.1\r\nHost\t: x\r\n\r\n", 400},
      {"chunk line too long",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" + std::string(5000, 'e'), 400},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Fed f = feed(c.bytes);
    EXPECT_EQ(f.state, FrameState::Invalid);
    EXPECT_EQ(f.status, c.status);
  }
}

// A header line past httplib's own line limit (8 KiB) inside a head the limit allows: one 431
// from the front, where httplib would answer a bare 400.
TEST(RequestFramer, HeaderLineOverHttplibsLimitIs431) {
  FrameLimits limits = small_limits();
  limits.max_head_bytes = 16384;
  const Fed long_line =
      feed("GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n", limits);
  EXPECT_EQ(long_line.state, FrameState::Invalid);
  EXPECT_EQ(long_line.status, 431);
  const Fed fits = feed("GET / HTTP/1.1\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n", limits);
  EXPECT_EQ(fits.state, FrameState::Complete);
}

TEST(RequestFramer, ManyTinyChunksAreRefusedBeforeTheBufferGrows) {
  FrameLimits l = small_limits();
  l.max_body_bytes = 1 << 20;
  std::string req = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 200000; ++i) req += "1\r\na\r\n";
  RequestFramer r(l);
  EXPECT_EQ(r.advance(req), FrameState::Invalid);
  EXPECT_EQ(r.error_status(), 400);
}

TEST(RequestFramer, ResetFramesTheNextRequest) {
  RequestFramer r(small_limits());
  std::string buf = kGet + kGet;
  ASSERT_EQ(r.advance(buf), FrameState::Complete);
  buf.erase(0, r.request_end());
  r.reset();
  EXPECT_EQ(r.advance(buf), FrameState::Complete);
  EXPECT_EQ(r.request_end(), kGet.size());
}

// A random stream of one to four requests, pipelined: GET/POST/PUT/DELETE, headers, bodies by
// Content-Length or chunked (extensions, trailers), and in some streams one malformation.
std::string random_stream(std::mt19937_64& rng) {
  auto pick = [&](int n) { return int(rng() % uint64_t(n)); };
  const int bad = pick(3) == 0 ? pick(7) : -1;  // which malformation, if any
  const int bad_at = pick(4);                   // in which request
  std::string out;
  const int n = 1 + pick(4);
  for (int i = 0; i < n; ++i) {
    const bool here = bad >= 0 && i == bad_at % n;
    const char* methods[] = {"GET", "POST", "PUT", "DELETE"};
    std::string head = std::string(here && bad == 0 ? "get" : methods[pick(4)]) + " /p" +
                       std::to_string(pick(1000)) + (pick(2) ? "?q=1" : "") + " HTTP/1.1\r\n";
    head += "Host: x\r\n";
    for (int h = pick(4); h > 0; --h)
      head += "X-H" + std::to_string(h) + (here && bad == 1 && h == 1 ? " : " : ": ") + "v" +
              std::to_string(pick(100)) + "\r\n";
    std::string body;
    const int mode = pick(3);  // 0: none, 1: Content-Length, 2: chunked
    if (mode == 1) {
      body = std::string(size_t(pick(40)), 'b');
      head += "Content-Length: " + (here && bad == 2 ? "1x" : std::to_string(body.size())) + "\r\n";
      if (here && bad == 3) head += "Transfer-Encoding: chunked\r\n";
    } else if (mode == 2) {
      head += std::string("Transfer-Encoding: ") + (here && bad == 4 ? "gzip" : "chunked") + "\r\n";
      for (int c = 1 + pick(3); c > 0; --c) {
        const size_t len = 1 + size_t(pick(20));
        char hex[16];
        std::snprintf(hex, sizeof hex, "%zx", len);
        body += (here && bad == 5 ? std::string("zz") : std::string(hex)) +
                (pick(4) ? "" : ";e=1") + "\r\n" +
                std::string(len + (here && bad == 6 ? 1 : 0), 'c') + "\r\n";
      }
      body += pick(3) ? "0\r\n\r\n" : "0\r\nT: v\r\n\r\n";
    }
    out += head + "\r\n" + body;
  }
  return out;
}

// Where each request of a stream ends by this framer, and whether it refused the stream.
nlohmann::json own_frames(const std::string& bytes) {
  RequestFramer r((FrameLimits()));
  std::string buf = bytes;
  std::vector<size_t> ends;
  size_t done = 0;
  bool error = false;
  while (!buf.empty()) {
    const FrameState s = r.advance(buf);
    if (s == FrameState::Invalid) error = true;
    if (s != FrameState::Complete) break;
    done += r.request_end();
    ends.push_back(done);
    buf.erase(0, r.request_end());
    r.reset();
  }
  return {{"ends", ends}, {"error", error}};
}

std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    if (i + 2 < in.size()) v |= uint8_t(in[i + 2]);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < in.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? k[v & 63] : '=';
  }
  return out;
}

// Differential: 2,000 random streams (pipelined, chunked, malformed) framed here and by Node's
// llhttp (tests/server/llhttp_frames.mjs, fed a byte at a time): the same request ends, and the
// same streams refused.
TEST(RequestFramer, AgreesWithLlhttpOnRandomStreams) {
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0)
      << "Node.js is needed for this test (its llhttp is the reference): run scripts/setup.sh";
  std::mt19937_64 rng(2026);
  std::vector<std::string> streams;
  nlohmann::json encoded = nlohmann::json::array();
  for (int i = 0; i < 2000; ++i) {
    streams.push_back(random_stream(rng));
    encoded.push_back(base64(streams.back()));
  }
  const std::filesystem::path in =
      std::filesystem::temp_directory_path() / ("shrike_llhttp_" + std::to_string(getpid()));
  std::ofstream(in) << encoded.dump();
  const std::string cmd =
      "node " + std::string(SHRIKE_SOURCE_DIR) + "/tests/server/llhttp_frames.mjs < " + in.string();
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, p)) > 0) text.append(chunk, got);
  ASSERT_EQ(pclose(p), 0) << text;
  std::filesystem::remove(in);
  const nlohmann::json reference = nlohmann::json::parse(text);
  ASSERT_EQ(reference.size(), streams.size());
  int refused = 0, requests = 0, mismatches = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    const nlohmann::json own = own_frames(streams[i]);
    refused += own["error"].get<bool>();
    requests += int(own["ends"].size());
    if (own != reference[i] && ++mismatches <= 5)
      ADD_FAILURE() << "stream " << i << ": shrike " << own.dump() << ", llhttp "
                    << reference[i].dump() << "\n"
                    << streams[i];
  }
  std::printf("  %zu streams, %d requests framed, %d streams refused, %d disagreements\n",
              streams.size(), requests, refused, mismatches);
  EXPECT_GT(refused, 100);
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace shrike::server
