// Where one HTTP/1.1 request ends in the bytes a connection has sent so far, checked against the
// server's limits, without parsing more than framing needs: the request line, the header lines
// (counted and sized), Content-Length, Transfer-Encoding: chunked (its chunk framing walked, the
// data counted) and Expect: 100-continue. The connection front (connection_front.h) uses it to
// hand a worker only complete requests; httplib then parses the same bytes for real. The rules
// follow what httplib 0.11 accepts: the head ends at the first empty CRLF line, header lines
// ending in a bare LF are skipped, a request without Content-Length or chunked coding has no body.
// Pure (no sockets, no clock), so every rule is unit-tested.
#pragma once

#include <cstddef>
#include <string>

namespace shrike::server {

struct FrameLimits {
  size_t max_head_bytes = size_t(16) << 10;  // request line + header lines + the empty line
  size_t max_headers = 100;                  // header lines
  size_t max_body_bytes = size_t(8) << 20;   // Content-Length, or the sum of chunk sizes
};

enum class FrameState {
  NeedHead,  // the head is not complete yet
  NeedBody,  // the head is complete, the body is not
  Complete,  // request_end() bytes hold one whole request
  Invalid,   // refuse it: error_status() and error_message() say why; close the connection after
};

class RequestFramer {
 public:
  explicit RequestFramer(FrameLimits limits) : limits_(limits) {}

  // Continues from where the last call stopped over `buf`, which holds the request from its
  // first byte (and may hold more after it). An `Expect: 100-continue` header line is removed
  // from `buf` when the head completes (the caller answers 100 itself; see take_continue()).
  FrameState advance(std::string& buf);

  size_t request_end() const { return end_; }
  int error_status() const { return status_; }
  const std::string& error_message() const { return message_; }
  // True once, after a head that asked for `100 Continue` and announced a body.
  bool take_continue();
  // For the next request on the connection (its bytes start at buf[0] again).
  void reset() { *this = RequestFramer(limits_); }

 private:
  FrameState fail(int status, std::string message);
  FrameState parse_head(std::string& buf, size_t head_end);
  FrameState scan_chunks(const std::string& buf);

  FrameLimits limits_;
  FrameState state_ = FrameState::NeedHead;
  size_t line_scan_ = 0;                 // NeedHead: where to resume the search for the
  size_t line_end_ = std::string::npos;  // request line's end ('\n'), once found
  size_t scan_from_ = 0;                 // NeedHead: where to resume the search for the empty line
  size_t head_end_ = 0;
  bool chunked_ = false;
  size_t content_length_ = 0;
  size_t chunk_pos_ = 0;     // chunked: the next chunk-size line (or trailer line)
  bool in_trailer_ = false;  // chunked: the last chunk was seen; trailer lines follow
  size_t body_bytes_ = 0;
  size_t trailers_ = 0;
  bool continue_ = false;
  size_t end_ = 0;
  int status_ = 0;
  std::string message_;
};

}  // namespace shrike::server
