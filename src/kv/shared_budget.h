// One KV memory budget shared by several paged caches (one per model a server holds), with a
// guaranteed minimum per cache: a burst on one model may take whatever the others do not use,
// but never the bytes another model is guaranteed, so it cannot starve it.
//
// The ledger counts *committed* bytes: blocks a cache has written at least once. A block's pages
// stay resident after its first write (KvStorage with lazy commit is zero until touched, and a
// freed block is kept for reuse), so committed bytes are what the caches take from the machine.
// Invariant, checked under the ledger's lock: the sum over members of max(committed, minimum)
// never exceeds the total. A member's minimum is reserved even while unused.
//
// Growth is two-phase so that a caller can plan against a fixed number of blocks: reserve()
// grants bytes for the caller's exclusive use (they count as committed), and release() gives back
// whatever of them it did not turn into blocks. The engine reserves its headroom before it plans a
// step and gives back the unused part right after (BlockPool::reserve_growth / return_growth).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace shrike::kv {

class KvMemoryLedger {
 public:
  // std::invalid_argument when total_bytes is 0.
  explicit KvMemoryLedger(size_t total_bytes);

  size_t total_bytes() const { return total_; }

  // A new member guaranteed min_bytes. std::invalid_argument (naming the numbers) when the
  // minimums would exceed what is not yet committed by others: a minimum is a promise.
  int add_member(std::string name, size_t min_bytes);
  // Forgets a member and everything it committed (its cache has been destroyed).
  void remove_member(int id);

  // Up to `want` more bytes for the member, in whole units of `unit` bytes (a block): the bytes
  // granted, possibly 0.
  size_t reserve(int id, size_t want, size_t unit);
  // Gives back bytes the member reserved and did not use.
  void release(int id, size_t bytes);
  // What reserve() would grant now, before rounding to units.
  size_t headroom(int id) const;

  struct Member {
    std::string name;
    size_t min_bytes = 0, committed_bytes = 0;
  };
  std::vector<Member> members() const;
  // Sum over members of max(committed, minimum): never above total_bytes().
  size_t claimed_bytes() const;
  // Sum of committed bytes.
  size_t committed_bytes() const;
  // The highest claimed_bytes() since construction (tests check it against the total).
  size_t peak_claimed_bytes() const;

 private:
  size_t claimed_locked() const;
  size_t headroom_locked(const Member& m) const;

  const size_t total_;
  mutable std::mutex mu_;
  std::map<int, Member> members_;
  int next_id_ = 1;
  size_t peak_ = 0;
};

// One cache's membership, counted in blocks; removes the member when destroyed.
class KvBudgetAccount {
 public:
  KvBudgetAccount(std::shared_ptr<KvMemoryLedger> ledger, std::string name, size_t min_bytes,
                  size_t block_bytes);
  ~KvBudgetAccount();
  KvBudgetAccount(const KvBudgetAccount&) = delete;
  KvBudgetAccount& operator=(const KvBudgetAccount&) = delete;

  size_t block_bytes() const { return block_bytes_; }
  size_t min_bytes() const { return min_bytes_; }
  // Blocks granted, at most `want`.
  int64_t reserve_blocks(int64_t want);
  void release_blocks(int64_t n);
  int64_t headroom_blocks() const;
  const KvMemoryLedger& ledger() const { return *ledger_; }

 private:
  std::shared_ptr<KvMemoryLedger> ledger_;
  int id_;
  size_t min_bytes_, block_bytes_;
};

}  // namespace shrike::kv
