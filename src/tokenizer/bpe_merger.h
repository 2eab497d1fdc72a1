// The merge loop shared by the vocabulary trainers (bpe_trainer.h: SentencePiece-style pieces,
// byte_bpe_trainer.h: byte-level pieces): BPE over segments (runs of symbols merges may join),
// with exact pair counts kept up to date incrementally: a merge revisits only the segments that
// hold the pair (`where`), and a lazy max-heap holds every pair's current count (entries whose
// count changed since are skipped). Ties go to the lexicographically smallest pair, so the result
// never depends on hashing. Internal to the tokenizer layer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace shrike::tokenizer {

class PairMerger {
 public:
  // chars: the single-symbol pieces (ids 0..); pairs merge while they occur min_frequency
  // times and their result has at most max_piece_chars symbols; a merge whose result is one of
  // `reserved` (special, byte or user-defined pieces) is banned instead.
  PairMerger(std::vector<std::string> chars, int64_t min_frequency, int32_t max_piece_chars,
             std::unordered_set<std::string> reserved)
      : min_frequency_(min_frequency),
        max_piece_chars_(max_piece_chars),
        reserved_(std::move(reserved)) {
    for (std::string& c : chars) {
      ids_.emplace(c, int32_t(str_.size()));
      str_.push_back(std::move(c));
      n_chars_.push_back(1);
    }
  }

  int32_t id_of(const std::string& piece) const {
    const auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
  }

  void add_segment(const std::vector<int32_t>& seq, int64_t freq) {
    std::string key;
    for (int32_t id : seq) key += str_[id];
    const auto [it, fresh] = seg_index_.emplace(std::move(key), int32_t(segs_.size()));
    if (!fresh) {
      freq_[it->second] += freq;
      return;
    }
    segs_.push_back(seq);
    freq_.push_back(freq);
  }

  // Merges until `budget` new pieces exist or no pair occurs min_frequency times; returns the
  // new pieces in merge order.
  std::vector<std::string> run(size_t budget);

  // Every merge applied, as its two parts, in order: the "left right" merges of a byte-level
  // vocabulary. Longer than run()'s pieces when two splits of one string were both merged (the
  // encoder needs both rules to reproduce training on every word).
  const std::vector<std::pair<std::string, std::string>>& merge_parts() const { return parts_; }

 private:
  struct Entry {
    int64_t count;
    int32_t a, b;
  };

  // Heap order: higher count first; on equal counts the lexicographically smaller pair.
  struct Worse {
    const std::vector<std::string>* str;
    bool operator()(const Entry& x, const Entry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const int c = (*str)[x.a].compare((*str)[y.a]);
      return c != 0 ? c > 0 : (*str)[x.b].compare((*str)[y.b]) > 0;
    }
  };
  Worse worse() const { return {&str_}; }

  void push(int64_t count, uint64_t key) {
    heap_.push_back({count, int32_t(key >> 32), int32_t(uint32_t(key))});
    std::push_heap(heap_.begin(), heap_.end(), worse());
  }

  // Records a count change of pair (a, b) in segment si (only pairs short enough to merge).
  void add_pair(int32_t a, int32_t b, int64_t d, int32_t si);
  // Replaces each (a, b) in segment si left to right by c (see the definition).
  void replace(int32_t si, int32_t a, int32_t b, int32_t c);

  const int64_t min_frequency_;
  const int32_t max_piece_chars_;
  const std::unordered_set<std::string> reserved_;
  std::vector<std::string> str_;  // symbol id -> piece
  std::vector<int32_t> n_chars_;  // symbol id -> characters in it
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::vector<int32_t>> segs_;
  std::vector<int64_t> freq_;
  std::unordered_map<std::string, int32_t> seg_index_;
  std::unordered_map<uint64_t, int64_t> count_;               // pairs with a positive count
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;  // segments that held the pair
  std::unordered_map<uint64_t, int64_t> delta_;               // count changes of one step
  std::unordered_set<uint64_t> banned_;
  std::vector<Entry> heap_;
  std::vector<std::pair<std::string, std::string>> parts_;  // every merge applied
};
}  // namespace shrike::tokenizer
