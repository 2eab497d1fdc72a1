// The connection front's framing (server/request_framer.h), the one parser that decides where a
// request ends: a byte stream framed whole and framed in two pieces (cut where the input's first
// byte says) must give the same request ends and the same refusal; a request never ends past the
// bytes given, and every stream ends in a request, a refusal or a need for more bytes.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "server/request_framer.h"

namespace {

using shrike::server::FrameLimits;
using shrike::server::FrameState;
using shrike::server::RequestFramer;

struct Frames {
  std::vector<size_t> ends;
  int status = 0;  // the refusal's, 0 when none
  bool operator==(const Frames&) const = default;
};

Frames frame(const std::string& bytes, size_t cut) {
  FrameLimits limits;
  limits.max_head_bytes = 1024;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  RequestFramer r(limits);
  Frames out;
  std::string buf = bytes.substr(0, cut);
  bool all_given = cut >= bytes.size();
  size_t done = 0;
  while (true) {
    const FrameState s = r.advance(buf);
    if (s == FrameState::Invalid) {
      out.status = r.error_status();
      if (out.status < 400 || out.status > 499) __builtin_trap();
      return out;
    }
    if (s == FrameState::Complete) {
      if (r.request_end() == 0 || r.request_end() > buf.size()) __builtin_trap();
      done += r.request_end();
      out.ends.push_back(done);
      buf.erase(0, r.request_end());
      r.reset();
      continue;
    }
    if (all_given) return out;
    buf += bytes.substr(cut);
    all_given = true;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t cut = std::min<size_t>(data[0], bytes.size());
  if (!(frame(bytes, bytes.size()) == frame(bytes, cut))) __builtin_trap();
  return 0;
}
