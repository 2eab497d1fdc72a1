#include "tokenizer/stream.h"

#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

// Bytes a character starting with lead byte c needs in all; 0 when c cannot start one.
size_t expected_len(uint8_t c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  // Find the start of a trailing, still incomplete character: scan back over at most 3
  // continuation bytes to a lead byte whose character runs past the end.
  size_t keep = pending_.size();
  for (size_t back = 1; back <= 4 && back <= pending_.size(); ++back) {
    const auto c = uint8_t(pending_[pending_.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = expected_len(c);
    if (need > back) keep = pending_.size() - back;  // incomplete: hold it
    break;
  }
  std::string out = pending_.substr(0, keep);
  pending_.erase(0, keep);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  std::string piece = tok_.token_to_piece(id);
  if (!started_ && !piece.empty()) {
    started_ = true;
    if (tok_.strips_leading_space() && piece[0] == ' ') piece.erase(0, 1);
  }
  return utf8_.push(piece);
}

}  // namespace shrike::tokenizer
