#include "tokenizer/bpe_merger.h"

namespace shrike::tokenizer {
namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return uint64_t(uint32_t(a)) << 32 | uint32_t(b);
}

}  // namespace

std::vector<std::string> PairMerger::run(size_t budget) {
  for (int32_t si = 0; si < int32_t(segs_.size()); ++si) {
    const std::vector<int32_t>& seq = segs_[si];
    for (size_t i = 0; i + 1 < seq.size(); ++i) add_pair(seq[i], seq[i + 1], freq_[si], si);
  }
  for (const auto& [key, count] : delta_)
    if (count > 0) {
      count_[key] = count;
      push(count, key);
    }
  delta_.clear();

  std::vector<std::string> merged;
  std::vector<uint32_t> seen(segs_.size(), 0);
  for (uint32_t step = 1; merged.size() < budget && !heap_.empty(); ++step) {
    std::pop_heap(heap_.begin(), heap_.end(), worse());
    const Entry e = heap_.back();
    heap_.pop_back();
    const uint64_t key = pair_key(e.a, e.b);
    const auto it = count_.find(key);
    if (it == count_.end() || it->second != e.count) continue;  // stale entry
    if (e.count < min_frequency_) break;
    std::string piece = str_[e.a] + str_[e.b];
    if (reserved_.count(piece)) {  // would duplicate a special, byte or user-defined piece
      banned_.insert(key);
      count_.erase(it);
      where_.erase(key);
      continue;
    }
    int32_t c = id_of(piece);
    if (c < 0) {  // else another split of the same string already made it: reuse the symbol
      c = int32_t(str_.size());
      ids_.emplace(piece, c);
      str_.push_back(piece);
      n_chars_.push_back(n_chars_[e.a] + n_chars_[e.b]);
      merged.push_back(std::move(piece));
    }
    parts_.emplace_back(str_[e.a], str_[e.b]);
    std::vector<int32_t> holders = std::move(where_[key]);
    where_.erase(key);
    for (int32_t si : holders) {
      if (seen[si] == step) continue;
      seen[si] = step;
      replace(si, e.a, e.b, c);
    }
    for (const auto& [k, d] : delta_) {
      if (d == 0) continue;
      int64_t& n = count_[k];
      n += d;
      if (n <= 0)
        count_.erase(k);
      else
        push(n, k);
    }
    delta_.clear();
  }
  return merged;
}

// Records a count change of pair (a, b) in segment si (only pairs short enough to merge).
void PairMerger::add_pair(int32_t a, int32_t b, int64_t d, int32_t si) {
  if (n_chars_[a] + n_chars_[b] > max_piece_chars_) return;
  const uint64_t key = pair_key(a, b);
  if (banned_.count(key)) return;
  delta_[key] += d;
  if (d > 0) {
    std::vector<int32_t>& w = where_[key];
    if (w.empty() || w.back() != si) w.push_back(si);
  }
}

// Replaces each (a, b) in segment si left to right by c, in place, recording only the pairs
// that change: around an occurrence, (x, a) becomes (x', c) (x' is x merged itself when the
// previous occurrence ends there) and (b, y) becomes (c, y) unless y starts the next
// occurrence, whose left side then counts that pair once.
void PairMerger::replace(int32_t si, int32_t a, int32_t b, int32_t c) {
  std::vector<int32_t>& seq = segs_[si];
  const int64_t f = freq_[si];
  const size_t n = seq.size();
  auto at = [&](size_t i) { return i + 1 < n && seq[i] == a && seq[i + 1] == b; };
  size_t w = 0;  // seq[0, w) is the merged sequence so far; the reads stay at or ahead of it
  for (size_t i = 0; i < n;) {
    if (!at(i)) {
      seq[w++] = seq[i++];
      continue;
    }
    if (i > 0) {
      add_pair(seq[i - 1], a, -f, si);
      add_pair(seq[w - 1], c, f, si);
    }
    add_pair(a, b, -f, si);
    if (i + 2 < n && !at(i + 2)) {
      add_pair(b, seq[i + 2], -f, si);
      add_pair(c, seq[i + 2], f, si);
    }
    seq[w++] = c;
    i += 2;
  }
  seq.resize(w);
}

}  // namespace shrike::tokenizer
