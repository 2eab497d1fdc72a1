#include "tokenizer/vocab_trim.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"

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

// Byte-level BPE pieces by text, as BpeModel indexes them (first id wins).
PieceIds bpe_pieces(const Vocab& v) {
  PieceIds ids;
  for (size_t id = 0; id < v.pieces.size(); ++id)
    if (v.types[id] == TokenType::Normal || v.types[id] == TokenType::Unused ||
        v.types[id] == TokenType::Byte)
      ids.emplace(v.pieces[id], int32_t(id));
  return ids;
}

// "left right" -> rank (the first of a repeated pair wins, as in BpeModel).
std::unordered_map<std::string, int32_t> merge_ranks(const Vocab& v) {
  std::unordered_map<std::string, int32_t> ranks;
  ranks.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); ++i) ranks.emplace(v.merges[i], int32_t(i));
  return ranks;
}

// BpeModel::encode_word's merge loop on a word that is exactly the piece's bytes, quadratic
// (pieces are short): each step merges the adjacent pair of lowest rank, leftmost on ties. Within
// any word where `id` comes out as one token, the merges inside its span are these, in this order
// (a merge across the span's edge would have joined it to a neighbour), so every product is one a
// kept text needs.
void bpe_merge_products(const Vocab& v, const PieceIds& ids,
                        const std::unordered_map<std::string, int32_t>& ranks, int32_t id,
                        std::vector<int32_t>& out) {
  const std::string_view s = v.pieces[size_t(id)];
  std::vector<uint32_t> cps, offs;
  unicode::decode_utf8(s, cps, offs);
  std::vector<std::string_view> sym;
  for (size_t i = 0; i < cps.size(); ++i) sym.push_back(s.substr(offs[i], offs[i + 1] - offs[i]));
  std::string pair;
  while (sym.size() > 1) {
    int32_t best_rank = -1;
    size_t best = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      pair.assign(sym[i]).append(" ").append(sym[i + 1]);
      const auto it = ranks.find(pair);
      if (it == ranks.end()) continue;
      if (best_rank < 0 || it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank < 0) return;  // not reachable by merges from its bytes
    const std::string_view joined(sym[best].data(), sym[best].size() + sym[best + 1].size());
    const auto it = ids.find(joined);
    if (it == ids.end()) return;  // a merge whose result is no piece (vocab_from_gguf refuses)
    out.push_back(it->second);
    sym[best] = joined;
    sym.erase(sym.begin() + int64_t(best) + 1);
  }
}

// Code points of a WordPiece piece without its word-initial marker.
size_t wpm_piece_chars(std::string_view piece) {
  static constexpr std::string_view kMarker = "\u2581";
  if (piece.starts_with(kMarker)) piece.remove_prefix(kMarker.size());
  std::vector<uint32_t> cps, offs;
  unicode::decode_utf8(piece, cps, offs);
  return cps.size();
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

  std::vector<int32_t> products;
  switch (v.kind) {
    case VocabKind::Spm: {
      // Closure: the products of a kept piece's merges are pieces whose own merges are among
      // those, so one pass over the pieces kept so far adds everything.
      const PieceIds ids = mergeable_pieces(v);
      for (int32_t id = 0; id < n; ++id)
        if (keep[size_t(id)]) merge_products(v, ids, id, products);
      break;
    }
    case VocabKind::Bpe: {
      // The 256 single-byte pieces every word starts from (normal pieces here, not byte
      // fallbacks): with them any text still encodes. Then the merge closure, as for SPM; the
      // merges list itself is cut to the kept pieces' merges by subset_vocab/trim_model_vocab.
      const PieceIds ids = bpe_pieces(v);
      std::string c;
      for (int b = 0; b < 256; ++b) {
        c.clear();
        unicode::append_utf8(byte_to_codepoint(uint8_t(b)), c);
        if (const auto it = ids.find(c); it != ids.end()) keep[size_t(it->second)] = true;
      }
      const auto ranks = merge_ranks(v);
      for (int32_t id = 0; id < n; ++id)
        if (keep[size_t(id)] && ids.contains(v.pieces[size_t(id)]))
          bpe_merge_products(v, ids, ranks, id, products);
      break;
    }
    case VocabKind::Wpm:
      // Greedy longest match: a kept text's pieces were the longest matches where they start,
      // and dropping other pieces leaves them so. Single characters (initial and continuation)
      // stay so that other words are still covered rather than becoming [UNK].
      for (int32_t id = 0; id < n; ++id)
        if (v.types[size_t(id)] == TokenType::Normal && wpm_piece_chars(v.pieces[size_t(id)]) == 1)
          keep[size_t(id)] = true;
      break;
  }
  for (int32_t id : products) keep[size_t(id)] = true;

  std::vector<int32_t> kept;
  for (int32_t id = 0; id < n; ++id)
    if (keep[size_t(id)]) kept.push_back(id);
  return kept;
}

std::vector<std::string> kept_merges(const std::vector<std::string>& pieces,
                                     const std::vector<std::string>& merges,
                                     const std::vector<int32_t>& kept) {
  std::unordered_set<std::string_view> is_kept;
  for (int32_t id : kept) is_kept.insert(pieces.at(size_t(id)));
  std::vector<std::string> out;
  for (const std::string& m : merges) {
    std::string_view a, b;
    if (!split_merge(m, a, b)) continue;
    const std::string joined = std::string(a) + std::string(b);
    if (is_kept.contains(a) && is_kept.contains(b) && is_kept.contains(joined)) out.push_back(m);
  }
  return out;
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
  out.merges = kept_merges(v.pieces, v.merges, kept);
  auto remap = [&](int32_t id) { return id >= 0 ? new_id[size_t(id)] : -1; };
  out.bos_id = remap(v.bos_id);
  out.eos_id = remap(v.eos_id);
  out.unk_id = remap(v.unk_id);
  out.pad_id = remap(v.pad_id);
  return out;
}

}  // namespace shrike::tokenizer
