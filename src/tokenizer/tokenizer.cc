#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/wordpiece.h"

namespace shrike::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

std::string markers_to_spaces(std::string_view p) {
  std::string d;
  for (size_t i = 0; i < p.size();) {
    if (p.substr(i, 3) == kSpaceMarker) {
      d.push_back(' ');
      i += 3;
    } else {
      d.push_back(p[i++]);
    }
  }
  return d;
}

}  // namespace

Tokenizer::Tokenizer(Vocab v) : vocab_(std::make_unique<const Vocab>(std::move(v))) {
  const Vocab& vb = *vocab_;
  const size_t n = vb.pieces.size();
  if (n == 0) throw std::invalid_argument("tokenizer: empty vocabulary");
  if (vb.scores.size() != n || vb.types.size() != n)
    throw std::invalid_argument("tokenizer: vocabulary has " + std::to_string(n) + " pieces, " +
                                std::to_string(vb.scores.size()) + " scores and " +
                                std::to_string(vb.types.size()) + " types");
  for (int32_t id : {vb.bos_id, vb.eos_id, vb.unk_id, vb.pad_id})
    if (id < -1 || id >= int32_t(n))
      throw std::invalid_argument("tokenizer: special token id " + std::to_string(id) +
                                  " outside the " + std::to_string(n) + "-token vocabulary");

  switch (vb.kind) {
    case VocabKind::Spm:
      spm_ = std::make_unique<SpmModel>(vb);
      strip_leading_space_ = vb.add_space_prefix;
      break;
    case VocabKind::Bpe:
      bpe_ = std::make_unique<BpeModel>(vb);
      break;
    case VocabKind::Wpm:
      wpm_ = std::make_unique<WpmModel>(vb);
      strip_leading_space_ = true;
      break;
  }

  decoded_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const TokenType t = vb.types[id];
    const std::string& p = vb.pieces[id];
    if (t == TokenType::UserDefined || t == TokenType::Control || t == TokenType::Unknown) {
      if (!p.empty()) added_[uint8_t(p[0])].push_back(int32_t(id));
    }
    if (t == TokenType::Control) continue;  // decodes to nothing
    if (spm_)
      decoded_[id] = spm_->piece_text(int32_t(id));
    else if (t == TokenType::UserDefined || t == TokenType::Unknown)
      decoded_[id] = p;
    else if (bpe_)
      decoded_[id] = BpeModel::piece_bytes(p);
    else
      decoded_[id] = markers_to_spaces(p);
  }
  for (auto& list : added_)
    std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) {
      return vb.pieces[a].size() > vb.pieces[b].size();
    });
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  if (spm_)
    spm_->encode(text, vocab_->add_space_prefix, out);  // every fragment, as llama.cpp
  else if (bpe_)
    bpe_->encode(text, out);
  else
    wpm_->encode(text, out);
}

std::vector<int32_t> Tokenizer::encode_continuation(std::string_view text) const {
  std::vector<int32_t> out;
  if (spm_)
    spm_->encode(text, false, out);
  else
    encode_text(text, out);
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos && vocab_->bos_id >= 0) out.push_back(vocab_->bos_id);
  out.reserve(out.size() + text.size() / 3);
  // Leftmost-longest scan for added tokens; the text between them goes to the model.
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    int32_t hit = -1;
    for (int32_t id : added_[uint8_t(text[i])]) {
      const TokenType t = vocab_->types[id];
      if (t != TokenType::UserDefined && !parse_special) continue;
      const std::string& p = vocab_->pieces[id];
      if (text.compare(i, p.size(), p) == 0) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    if (i > start) encode_text(text.substr(start, i - start), out);
    out.push_back(hit);
    i += vocab_->pieces[hit].size();
    start = i;
  }
  if (start < text.size()) encode_text(text.substr(start), out);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw std::out_of_range("tokenizer: token id " + std::to_string(id) + " outside the " +
                            std::to_string(n_vocab()) + "-token vocabulary");
  return decoded_[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id);
  if (strip_leading_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace shrike::tokenizer
