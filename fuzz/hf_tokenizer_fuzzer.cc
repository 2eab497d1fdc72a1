// Hugging Face tokenizers: tokenizer.json (and tokenizer_config.json after the separator line),
// then a tokenizer built from what was read, encoding and decoding a fixed text.
#include <cstdint>

#include "core/file_buffer.h"
#include "fuzz_input.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  auto [json, config] = fuzz::split_once(fuzz::as_text(data, size));
  fuzz::write_file("tokenizer.json", json);
  if (config.data() != nullptr)
    fuzz::write_file("tokenizer_config.json", config);
  else
    fuzz::remove_file("tokenizer_config.json");
  try {
    tokenizer::HfTokenizer hf = tokenizer::load_hf_tokenizer(fuzz::scratch_dir());
    tokenizer::Tokenizer tok(std::move(hf.vocab));
    std::vector<int32_t> ids =
        tok.encode("Hello, world! 12345 \xe4\xbd\xa0\xe5\xa5\xbd <s></s>", true,
                   /*parse_special=*/true);
    (void)tok.decode(ids);
    for (int32_t id = 0; id < tok.n_vocab() && id < 64; ++id) (void)tok.token_to_piece(id);
  } catch (const FileError&) {
  } catch (const std::invalid_argument&) {
    // Tokenizer's documented refusal of an unusable vocabulary.
  }
  return 0;
}
