#include "tokenizer/vocab_trim.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "tokenizer/spm.h"

namespace shrike::tokenizer {
namespace {

using PieceIds = std::unordered_map<std::string_view, int32_t>;

PieceIds mergeable_pieces(const Vocab& v) {
  PieceIds ids;
  for (size_t id = 0; id < v.pieces.size(); ++id)
    if (spm_mergeable(v.types[id])) ids.emplace(v.pieces[id], int32_t(id));
  return ids;
}

// encode_chunk's merge loop on one piece's text, quadratic (pieces are short): each step merges
// the adjacent pair with the highest score, leftmost on ties, as the heap there pops it.
void merge_products(const Vocab& v, const PieceIds& ids, int32_t id, std::vector<int32_t>& out) {
  if (!spm_mergeable(v.types[size_t(id)])) return;
  const std::string_view s = v.pieces[size_t(id)];
  std::vector<std::string_view> sym;
  for (size_t i = 0; i < s.size();) {
    const size_t n = spm_utf8_len(s, i);
    sym.push_back(s.substr(i, n));
    i += n;
  }
  while (sym.size() > 1) {
    int64_t best = -1;
    int32_t best_id = -1;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      // Adjacent symbols are adjacent substrings of s, so their union is one view.
      const std::string_view pair(sym[i].data(), sym[i].size() + sym[i + 1].size());
      const auto it = ids.find(pair);
      if (it == ids.end()) continue;
      if (best < 0 || v.scores[size_t(it->second)] > v.scores[size_t(best_id)]) {
        best = int64_t(i);
        best_id = it->second;
      }
    }
    if (best < 0) return;  // the piece is not reachable by merges from its characters
    out.push_back(best_id);
    sym[size_t(best)] = std::string_view(sym[size_t(best)].data(),
                                         sym[size_t(best)].size() + sym[size_t(best) + 1].size());
    sym.erase(sym.begin() + int64_t(best) + 1);
  }
}

}  // namespace

std::vector<int32_t> spm_merge_products(const Vocab& v, int32_t id) {
  if (id < 0 || id >= v.size())
    throw std::invalid_argument("spm_merge_products: id " + std::to_string(id) +
                                " outside the vocabulary");
  std::vector<int32_t> out;
  merge_products(v, mergeable_pieces(v), id, out);
  return out;
}

std::vector<int32_t> tokens_to_keep(const Tokenizer& tok, const std::vector<std::string>& texts,
                                    const std::vector<int32_t>& extra) {
  const Vocab& v = tok.vocab();
  if (v.kind != VocabKind::Spm)
    throw std::invalid_argument(
        "vocabulary trimming supports SentencePiece-style vocabularies (tokenizer.ggml.model "
        "'llama'); this one is byte-level BPE or WordPiece, whose merges or word pieces would "
        "need trimming too");
  const int32_t n = v.size();
  std::vector<bool> keep(size_t(n), false);
  for (size_t id = 0; id < size_t(n); ++id) {
    const TokenType t = v.types[id];
    keep[id] = t == TokenType::Byte || t == TokenType::Control || t == TokenType::Unknown ||
               t == TokenType::UserDefined;
  }
  for (int32_t id : {v.bos_id, v.eos_id, v.unk_id, v.pad_id})
    if (id >= 0) keep[size_t(id)] = true;
  for (int32_t id : extra) {
    if (id < 0 || id >= n)
      throw std::invalid_argument("extra token id " + std::to_string(id) + " outside the " +
                                  std::to_string(n) + "-token vocabulary");
    keep[size_t(id)] = true;
  }
  for (const std::string& text : texts)
    for (int32_t id : tok.encode(text, /*add_bos=*/false)) keep[size_t(id)] = true;

  // Closure: the products of a kept piece's merges are pieces whose own merges are among
  // those, so one pass over the pieces kept so far adds everything.
  const PieceIds ids = mergeable_pieces(v);
  std::vector<int32_t> products;
  for (int32_t id = 0; id < n; ++id)
    if (keep[size_t(id)]) merge_products(v, ids, id, products);
  for (int32_t id : products) keep[size_t(id)] = true;

  std::vector<int32_t> kept;
  for (int32_t id = 0; id < n; ++id)
    if (keep[size_t(id)]) kept.push_back(id);
  return kept;
}

Vocab subset_vocab(const Vocab& v, const std::vector<int32_t>& kept) {
  std::vector<int32_t> new_id(size_t(v.size()), -1);
  Vocab out = v;
  out.pieces.clear();
  out.scores.clear();
  out.types.clear();
  for (size_t i = 0; i < kept.size(); ++i) {
    const int32_t id = kept[i];
    if (id < 0 || id >= v.size() || (i > 0 && id <= kept[i - 1]))
      throw std::invalid_argument("subset_vocab: kept ids must be sorted, unique and in range");
    new_id[size_t(id)] = int32_t(i);
    out.pieces.push_back(v.pieces[size_t(id)]);
    out.scores.push_back(v.scores[size_t(id)]);
    out.types.push_back(v.types[size_t(id)]);
  }
  auto remap = [&](int32_t id) { return id >= 0 ? new_id[size_t(id)] : -1; };
  out.bos_id = remap(v.bos_id);
  out.eos_id = remap(v.eos_id);
  out.unk_id = remap(v.unk_id);
  out.pad_id = remap(v.pad_id);
  return out;
}

}  // namespace shrike::tokenizer
