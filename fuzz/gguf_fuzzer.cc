// GGUF model files: the header reader, then what loading a model reads from a valid header (the
// configuration, the vocabulary, a carried task, the weights themselves).
#include <cstdint>

#include "core/file_buffer.h"
#include "fuzz_input.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "task/task_definition.h"
#include "tokenizer/vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  const std::string path = fuzz::write_file("model.gguf", fuzz::as_text(data, size));
  try {
    gguf::GgufFile f = gguf::GgufFile::open(path);
    for (const std::string& key : f.keys()) (void)f.find(key);
    try {
      (void)model::config_from_gguf(f);
    } catch (const FileError&) {
    }
    try {
      (void)tokenizer::vocab_from_gguf(f);
    } catch (const FileError&) {
    }
    try {
      (void)task::task_from_gguf(f);
    } catch (const FileError&) {
    }
    (void)model::load_model(path);
  } catch (const FileError&) {
    // The documented answer to a bad file: one line naming it.
  }
  return 0;
}
