// llama2.c files: the model checkpoint (7-int header + f32 arrays) and the tok*.bin vocabulary.
#include <cstdint>

#include "core/file_buffer.h"
#include "fuzz_input.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  // The first byte says which of the two files the rest is.
  if (size < 1) return 0;
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  if (data[0] & 1) {
    const std::string path = fuzz::write_file("model.bin", rest);
    try {
      (void)model::load_model(path);
    } catch (const FileError&) {
    }
  } else {
    const std::string path = fuzz::write_file("tok.bin", rest);
    try {
      tokenizer::Vocab v = tokenizer::load_llama2c_vocab(path, 0);
      tokenizer::Tokenizer tok(std::move(v));
      (void)tok.decode(tok.encode("Once upon a time, 42 cats.", true));
    } catch (const FileError&) {
    } catch (const std::invalid_argument&) {
      // Tokenizer's documented refusal of an unusable vocabulary (empty, bad special ids).
    }
  }
  return 0;
}
