#include "constrain/token_vocab.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include "tokenizer/tokenizer.h"

namespace shrike::constrain {

namespace {
// Longer tokens are refused rather than given a deeper trie (and a larger walk stack).
constexpr size_t kMaxTokenBytes = 1024;
}  // namespace

TokenVocab::TokenVocab(std::vector<std::string> token_bytes, std::vector<uint8_t> usable,
                       int32_t eos, bool strip_leading_space)
    : bytes_(std::move(token_bytes)),
      usable_(std::move(usable)),
      eos_(eos),
      strip_leading_space_(strip_leading_space) {
  if (usable_.size() != bytes_.size())
    throw std::invalid_argument("token vocab: bytes and usable flags differ in length");
  if (eos_ < -1 || eos_ >= size()) throw std::invalid_argument("token vocab: eos id out of range");
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < size(); ++i) {
    if (bytes_[size_t(i)].empty() || bytes_[size_t(i)].size() > kMaxTokenBytes || i == eos_)
      usable_[size_t(i)] = 0;
    if (usable_[size_t(i)]) ids.push_back(i);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)] ||
           (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
  });

  // Sorted strings give the trie in preorder: each string shares its longest common prefix with
  // the previous one, so the open path is popped to that depth and the rest appended.
  nodes_.push_back({});
  std::vector<int32_t> path{0};  // open node at each depth
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = bytes_[size_t(id)];
    size_t lcp = 0;
    if (prev)
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    while (path.size() > lcp + 1) {
      nodes_[size_t(path.back())].skip = int32_t(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      Node n;
      n.depth = uint16_t(d + 1);
      n.byte = uint8_t(s[d]);
      n.tok_begin = n.tok_end = int32_t(tokens_.size());
      path.push_back(int32_t(nodes_.size()));
      nodes_.push_back(n);
    }
    Node& end = nodes_[size_t(path.back())];
    if (end.tok_end != int32_t(tokens_.size())) end.tok_begin = int32_t(tokens_.size());
    tokens_.push_back(id);
    end.tok_end = int32_t(tokens_.size());
    max_depth_ = std::max(max_depth_, int32_t(s.size()));
    prev = &s;
  }
  for (int32_t n : path) nodes_[size_t(n)].skip = int32_t(nodes_.size());
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const tokenizer::Tokenizer& tok) {
  using tokenizer::TokenType;
  const auto& v = tok.vocab();
  const int32_t n = tok.n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<uint8_t> usable(size_t(n), 0);
  std::unordered_set<std::string> normal;
  for (int32_t i = 0; i < n; ++i) {
    bytes[size_t(i)] = tok.token_to_piece(i);
    const TokenType t = v.types[size_t(i)];
    usable[size_t(i)] =
        t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Byte;
    if (t == TokenType::Normal || t == TokenType::UserDefined) normal.insert(bytes[size_t(i)]);
  }
  for (int32_t i = 0; i < n; ++i)
    if (v.types[size_t(i)] == TokenType::Byte && normal.count(bytes[size_t(i)]))
      usable[size_t(i)] = 0;
  auto vocab = std::make_shared<TokenVocab>(std::move(bytes), std::move(usable), tok.eos(),
                                            tok.strips_leading_space());
  // Mid-sequence text (no dummy-prefix space). Whatever comes out is checked against the
  // constraint byte for byte (Constraint::compute). The vocabulary keeps its own tokenizer:
  // it is shared by constraints that may outlive the caller's (a command's local tokenizer).
  auto own = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Vocab(v));
  vocab->set_encoder([own](std::string_view text) { return own->encode_continuation(text); });
  return vocab;
}

}  // namespace shrike::constrain
