// Streaming detokenisation: tokens arrive one at a time, and a multi-byte UTF-8 character may be
// split across them (byte-level BPE, SPM byte fallback). These helpers hold back the bytes of an
// incomplete character until the rest arrives, so what they return is always whole characters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shrike::tokenizer {

class Tokenizer;

// Bytes in, complete UTF-8 out. Bytes that can never start or continue a character (invalid
// UTF-8) are passed through at once rather than held forever.
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  std::string flush();  // whatever is held (an unfinished character at the end of the stream)

 private:
  std::string pending_;
};

// Token ids in, text out: decode() of the ids so far equals the concatenation of push() results
// plus flush().
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);
  std::string flush() { return utf8_.flush(); }

 private:
  const Tokenizer& tok_;
  Utf8Stream utf8_;
  bool started_ = false;  // a non-empty piece has been seen (leading-space stripping is done)
};

}  // namespace shrike::tokenizer
