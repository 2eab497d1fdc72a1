// `shrike tokenize`: a file's whole text to token ids (one line, space-separated), or ids back to
// text with --detokenize. No BOS/EOS unless --add-special (like add_special_tokens=False).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/file_buffer.h"
#include "gguf/gguf.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace shrike::cli {
namespace {

struct TokenizeArgs {
  std::string model, text_file;
  bool add_special = false, parse_special = false, detokenize = false;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

tokenizer::Tokenizer open_tokenizer(const std::string& path) {
  if (std::filesystem::is_directory(path))  // a Hugging Face model folder (tokenizer.json)
    return tokenizer::Tokenizer(tokenizer::load_hf_tokenizer(path).vocab);
  const MappedFile f = MappedFile::open(path);
  const bool gguf =
      f.size() >= 4 && std::string_view(reinterpret_cast<const char*>(f.data()), 4) == "GGUF";
  // A llama2.c tok*.bin holds no count: read entries up to the end of the file.
  return tokenizer::Tokenizer(gguf ? tokenizer::vocab_from_gguf(gguf::GgufFile::open(path))
                                   : tokenizer::load_llama2c_vocab(path, 0));
}

int run_tokenize(const TokenizeArgs& a) {
  const tokenizer::Tokenizer tok = open_tokenizer(a.model);
  const std::string text = read_file(a.text_file);
  if (a.detokenize) {
    const std::vector<int32_t> ids = parse_token_ids(text, tok.n_vocab(), a.text_file);
    const std::string out = tok.decode(ids);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }
  std::vector<int32_t> ids =
      tok.encode(text, a.add_special && tok.vocab().add_bos, a.parse_special);
  if (a.add_special && tok.vocab().add_eos && tok.eos() >= 0) ids.push_back(tok.eos());
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

Runner add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  app.add_option("-m,--model", a->model, "model or vocabulary: GGUF, or llama2.c tok*.bin")
      ->required();
  app.add_option("--text-file", a->text_file, "input: text (or ids with --detokenize)")->required();
  app.add_flag("--add-special", a->add_special, "add BOS/EOS as the vocabulary says");
  app.add_flag("--parse-special", a->parse_special,
               "turn control-token text like <|endoftext|> into its id");
  app.add_flag("--detokenize", a->detokenize, "read token ids, print the text");
  return [a] { return run_tokenize(*a); };
}

}  // namespace shrike::cli
