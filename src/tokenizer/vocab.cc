#include "tokenizer/vocab.h"

#include <cstring>
#include <limits>

#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"

namespace shrike::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

bool is_byte_piece(const std::string& p) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

}  // namespace

Vocab load_llama2c_vocab(const std::string& path, int32_t vocab_size) {
  const MappedFile file = MappedFile::open(path);
  const uint8_t* p = file.data();
  const size_t size = file.size();
  size_t off = 0;
  auto read_u32 = [&](const char* what, int32_t id) {
    if (size - off < 4)
      throw FileError(path + ": truncated: " + what + " of token " + std::to_string(id) +
                      " at byte " + std::to_string(off) + " is past the end of the file (" +
                      std::to_string(size) + " bytes)");
    uint32_t v;
    std::memcpy(&v, p + off, 4);
    off += 4;
    return v;
  };
  if (size < 4)
    throw FileError(path + ": truncated: no max_token_length header (llama2.c tokenizer)");
  off = 4;  // max_token_length: only a buffer-size hint for llama2.c; lengths are checked below

  Vocab v;
  for (int32_t id = 0; vocab_size <= 0 ? off < size : id < vocab_size; ++id) {
    const uint32_t score_bits = read_u32("score", id);
    const uint32_t len = read_u32("length", id);
    if (len > size - off)
      throw FileError(path + ": token " + std::to_string(id) + " claims " + std::to_string(len) +
                      " bytes at byte " + std::to_string(off) + ", past the end of the file (" +
                      std::to_string(size) + " bytes)");
    std::string raw(reinterpret_cast<const char*>(p + off), len);
    off += len;
    float score;
    std::memcpy(&score, &score_bits, 4);

    // llama2.c's export turned "▁" into ' ' and wrapped BOS/EOS in newlines; undo both.
    std::string piece;
    if (raw == "\n<s>\n") {
      piece = "<s>";
    } else if (raw == "\n</s>\n") {
      piece = "</s>";
    } else {
      for (char c : raw) {
        if (c == ' ')
          piece.append(kSpaceMarker);
        else
          piece.push_back(c);
      }
    }
    TokenType type = TokenType::Normal;
    if (id == 0)
      type = TokenType::Unknown;
    else if (id == 1 || id == 2)
      type = TokenType::Control;
    else if (is_byte_piece(piece))
      type = TokenType::Byte;
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  if (v.pieces.size() < 3)
    throw FileError(path + ": only " + std::to_string(v.pieces.size()) +
                    " tokens; a llama2.c vocabulary needs at least <unk>, <s>, </s>");
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  return v;
}

Vocab vocab_from_gguf(const gguf::GgufFile& f) {
  const std::string& path = f.path();
  const std::string model = f.get_string("tokenizer.ggml.model");
  Vocab v;
  if (model == "llama")
    v.kind = VocabKind::Spm;
  else if (model == "gpt2")
    v.kind = VocabKind::Bpe;
  else if (model == "bert")
    v.kind = VocabKind::Wpm;
  else
    throw FileError(path + ": unsupported tokenizer model '" + model +
                    "' (supported: 'llama' SentencePiece BPE, 'gpt2' byte-level BPE, 'bert' "
                    "WordPiece)");
  const bool spm = v.kind == VocabKind::Spm;

  v.pieces = f.get_string_array("tokenizer.ggml.tokens");
  const size_t n = v.pieces.size();
  if (n == 0) throw FileError(path + ": tokenizer.ggml.tokens is empty");
  if (n > size_t(std::numeric_limits<int32_t>::max()))
    throw FileError(path + ": tokenizer.ggml.tokens has too many entries");
  auto check_len = [&](const char* key, size_t len) {
    if (len != n)
      throw FileError(path + ": " + key + " has " + std::to_string(len) +
                      " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  };
  // Scores rank SPM merges; BPE and WordPiece ignore them, and converters may leave them out.
  const std::vector<double> scores = spm || f.has("tokenizer.ggml.scores")
                                         ? f.get_float_array("tokenizer.ggml.scores")
                                         : std::vector<double>(n, 0.0);
  const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
  check_len("tokenizer.ggml.scores", scores.size());
  check_len("tokenizer.ggml.token_type", types.size());
  v.scores.assign(scores.begin(), scores.end());
  v.types.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = types[i];
    if (t < 0 || t > 6)
      throw FileError(path + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is " +
                      std::to_string(t) + ", expected 0..6");
    // 0 is llama.cpp's "undefined" type, which it treats as normal.
    v.types.push_back(t == 0 ? TokenType::Normal : TokenType(t));
  }

  if (v.kind == VocabKind::Bpe) {
    v.merges = f.get_string_array("tokenizer.ggml.merges");
    v.pre = f.get_string_or("tokenizer.ggml.pre", "");
    PreType pre;
    if (!pre_type_from_name(v.pre, pre))
      throw FileError(path + ": unknown pre-tokenizer tokenizer.ggml.pre = '" + v.pre + "'");
    if (const std::string bad = check_merges(v.pieces, v.merges); !bad.empty())
      throw FileError(path + ": " + bad);
  }

  // Special ids: absent -> llama.cpp's SPM defaults (none for BPE; BERT's [CLS]/[SEP]); -1 /
  // 0xFFFFFFFF (what converters write for "none") -> -1; anything else must be a valid id.
  auto special = [&](const char* key, int32_t def) -> int32_t {
    if (!f.has(key)) return def < int32_t(n) ? def : -1;
    const int64_t id = f.get_int(key);
    if (id == -1 || id == int64_t(0xFFFFFFFF)) return -1;
    if (id < 0 || uint64_t(id) >= n)
      throw FileError(path + ": " + key + " is " + std::to_string(id) + ", outside the " +
                      std::to_string(n) + "-token vocabulary");
    return int32_t(id);
  };
  const bool wpm = v.kind == VocabKind::Wpm;
  v.bos_id =
      special(wpm ? "tokenizer.ggml.cls_token_id" : "tokenizer.ggml.bos_token_id", spm   ? 1
                                                                                   : wpm ? 101
                                                                                         : -1);
  v.eos_id = special(wpm ? "tokenizer.ggml.seperator_token_id" : "tokenizer.ggml.eos_token_id",
                     spm   ? 2
                     : wpm ? 102
                           : -1);
  v.unk_id = special("tokenizer.ggml.unknown_token_id", spm ? 0 : wpm ? 100 : -1);
  v.pad_id = special("tokenizer.ggml.padding_token_id", -1);
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v.kind != VocabKind::Bpe);
  v.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", wpm);
  v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
  return v;
}

}  // namespace shrike::tokenizer
