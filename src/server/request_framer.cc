#include "server/request_framer.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace shrike::server {
namespace {

// httplib answers 414 past this many bytes of request line (CPPHTTPLIB_REQUEST_URI_MAX_LENGTH).
constexpr size_t kMaxRequestLine = 8192;
// httplib refuses a header line (with its CRLF) longer than this (CPPHTTPLIB_HEADER_MAX_LENGTH)
// with a bare 400; the front answers 431 first, so the two never disagree.
constexpr size_t kMaxHeaderLine = 8192;
// A chunk-size line (hex size, extensions) or trailer line longer than this is refused.
constexpr size_t kMaxChunkLine = 4096;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// "METHOD TARGET HTTP/1.x": three non-empty parts separated by single spaces.
bool valid_request_line(std::string_view line) {
  const size_t a = line.find(' ');
  if (a == 0 || a == std::string_view::npos) return false;
  const size_t b = line.find(' ', a + 1);
  if (b == std::string_view::npos || b == a + 1) return false;
  const std::string_view version = line.substr(b + 1);
  if (version.find(' ') != std::string_view::npos) return false;
  for (size_t i = 0; i < a; ++i)
    if (!std::isupper(static_cast<unsigned char>(line[i]))) return false;
  return version == "HTTP/1.1" || version == "HTTP/1.0";
}

// A decimal Content-Length of at most 18 digits, or -1.
int64_t parse_length(std::string_view v) {
  if (v.empty() || v.size() > 18) return -1;
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

// The size of a chunk-size line ("1a;ext=x"), or -1.
int64_t parse_chunk_size(std::string_view line) {
  const size_t semi = line.find(';');
  const std::string_view hex = trim(line.substr(0, semi));
  if (hex.empty() || hex.size() > 15) return -1;
  int64_t n = 0;
  for (char c : hex) {
    const int d = std::isdigit(static_cast<unsigned char>(c))
                      ? c - '0'
                      : (std::tolower(static_cast<unsigned char>(c)) >= 'a' &&
                                 std::tolower(static_cast<unsigned char>(c)) <= 'f'
                             ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                             : -1);
    if (d < 0) return -1;
    n = n * 16 + d;
  }
  return n;
}

}  // namespace

FrameState RequestFramer::fail(int status, std::string message) {
  status_ = status;
  message_ = std::move(message);
  return state_ = FrameState::Invalid;
}

bool RequestFramer::take_continue() {
  const bool c = continue_;
  continue_ = false;
  return c;
}

FrameState RequestFramer::advance(std::string& buf) {
  if (state_ == FrameState::NeedHead) {
    // The request line (searched once: a head sent a byte at a time must not cost n^2).
    if (line_end_ == std::string::npos) {
      line_end_ = buf.find('\n', line_scan_);
      line_scan_ = buf.size();
    }
    // Past the head limit (or httplib's own limit) the request line alone is too long.
    const size_t max_line = std::min(kMaxRequestLine, limits_.max_head_bytes);
    if ((line_end_ == std::string::npos ? buf.size() : line_end_) > max_line)
      return fail(414, "The request line is longer than " + std::to_string(max_line) + " bytes.");
    // The head ends at the first empty CRLF line after the request line.
    const size_t p = buf.find("\n\r\n", scan_from_);
    if (p == std::string::npos) {
      if (buf.size() > limits_.max_head_bytes)
        return fail(431, "The request head (request line and headers) is larger than " +
                             std::to_string(limits_.max_head_bytes) + " bytes.");
      scan_from_ = buf.size() >= 2 ? buf.size() - 2 : 0;
      return state_;
    }
    if (p + 3 > limits_.max_head_bytes)
      return fail(431, "The request head (request line and headers) is larger than " +
                           std::to_string(limits_.max_head_bytes) + " bytes.");
    if (parse_head(buf, p + 3) == FrameState::Invalid) return state_;
    state_ = FrameState::NeedBody;
  }
  if (state_ == FrameState::NeedBody) {
    if (chunked_) return scan_chunks(buf);
    if (buf.size() - head_end_ < content_length_) return state_;
    end_ = head_end_ + content_length_;
    return state_ = FrameState::Complete;
  }
  return state_;
}

FrameState RequestFramer::parse_head(std::string& buf, size_t head_end) {
  const size_t line_end = line_end_;
  if (!valid_request_line(trim(std::string_view(buf).substr(0, line_end))))
    return fail(400, "Malformed HTTP request line.");
  size_t headers = 0;
  bool has_length = false;
  int64_t length = 0;
  bool has_te = false;
  size_t expect_at = std::string::npos, expect_len = 0;
  for (size_t at = line_end + 1; at + 2 < head_end;) {
    const size_t nl = buf.find('\n', at);  // < head_end: the head ends with "\r\n"
    const std::string_view line = std::string_view(buf).substr(at, nl - at);
    if (++headers > limits_.max_headers)
      return fail(431, "More than " + std::to_string(limits_.max_headers) + " header lines.");
    if (line.size() + 1 > kMaxHeaderLine)
      return fail(431,
                  "A header line is longer than " + std::to_string(kMaxHeaderLine) + " bytes.");
    const size_t colon = line.find(':');
    // RFC 9112 5.1: no whitespace between a field name and its colon; a server must answer 400
    // (else "Content-Length : 30" would frame one way here and another in a proxy).
    if (colon != std::string_view::npos && colon > 0 &&
        (line[colon - 1] == ' ' || line[colon - 1] == '\t'))
      return fail(400, "Whitespace between a header name and its colon.");
    if (!line.empty() && line.back() == '\r' && colon != std::string_view::npos) {
      const std::string_view name = line.substr(0, colon);
      const std::string_view value = trim(line.substr(colon + 1));
      if (iequals(name, "Content-Length")) {
        const int64_t n = parse_length(value);
        if (n < 0) return fail(400, "Invalid Content-Length.");
        if (has_length && n != length) return fail(400, "Conflicting Content-Length headers.");
        has_length = true;
        length = n;
      } else if (iequals(name, "Transfer-Encoding")) {
        if (!iequals(value, "chunked"))
          return fail(400, "Transfer-Encoding '" + std::string(value) +
                               "' is not supported (only chunked).");
        has_te = true;
      } else if (iequals(name, "Expect") && iequals(value, "100-continue")) {
        expect_at = at;
        expect_len = nl + 1 - at;
      }
    }
    at = nl + 1;
  }
  if (has_te && has_length)
    return fail(400, "A request may not carry both Content-Length and Transfer-Encoding.");
  if (has_length && size_t(length) > limits_.max_body_bytes)
    return fail(413, "The request body is larger than " + std::to_string(limits_.max_body_bytes) +
                         " bytes.");
  chunked_ = has_te;
  content_length_ = size_t(length);
  if (expect_at != std::string::npos) {
    buf.erase(expect_at, expect_len);
    head_end -= expect_len;
    continue_ = chunked_ || content_length_ > 0;
  }
  head_end_ = head_end;
  chunk_pos_ = head_end;
  return state_;
}

FrameState RequestFramer::scan_chunks(const std::string& buf) {
  while (true) {
    const size_t nl = buf.find('\n', chunk_pos_);
    if (nl == std::string::npos) {
      if (buf.size() - chunk_pos_ > kMaxChunkLine)
        return fail(400, "A chunk-size or trailer line is too long.");
      return state_;
    }
    if (nl - chunk_pos_ > kMaxChunkLine)
      return fail(400, "A chunk-size or trailer line is too long.");
    std::string_view line = std::string_view(buf).substr(chunk_pos_, nl - chunk_pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (in_trailer_) {
      chunk_pos_ = nl + 1;
      if (line.empty()) {
        end_ = chunk_pos_;
        return state_ = FrameState::Complete;
      }
      if (++trailers_ > limits_.max_headers)
        return fail(431, "More than " + std::to_string(limits_.max_headers) + " trailer lines.");
      continue;
    }
    const int64_t size = parse_chunk_size(line);
    if (size < 0) return fail(400, "Malformed chunk size in a chunked body.");
    if (size == 0) {
      in_trailer_ = true;
      chunk_pos_ = nl + 1;
      continue;
    }
    if (body_bytes_ + size_t(size) > limits_.max_body_bytes)
      return fail(413, "The request body is larger than " + std::to_string(limits_.max_body_bytes) +
                           " bytes.");
    // Framing may not cost more than the data it frames: many one-byte chunks are refused
    // before they can grow the buffer to several times the body limit.
    if (nl + 1 - head_end_ - body_bytes_ > limits_.max_body_bytes / 4 + kMaxChunkLine)
      return fail(400, "The chunked body's framing is larger than its data.");
    const size_t data_end = nl + 1 + size_t(size);
    if (buf.size() < data_end + 2) return state_;
    if (buf[data_end] != '\r' || buf[data_end + 1] != '\n')
      return fail(400, "A chunk of a chunked body does not end with CRLF.");
    body_bytes_ += size_t(size);
    chunk_pos_ = data_end + 2;
  }
}

}  // namespace shrike::server
