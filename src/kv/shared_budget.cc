#include "kv/shared_budget.h"

#include <algorithm>
#include <stdexcept>

namespace shrike::kv {

KvMemoryLedger::KvMemoryLedger(size_t total_bytes) : total_(total_bytes) {
  if (total_bytes == 0) throw std::invalid_argument("the KV memory budget must be above 0 bytes");
}

size_t KvMemoryLedger::claimed_locked() const {
  size_t sum = 0;
  for (const auto& [id, m] : members_) sum += std::max(m.committed_bytes, m.min_bytes);
  return sum;
}

int KvMemoryLedger::add_member(std::string name, size_t min_bytes) {
  std::lock_guard lock(mu_);
  const size_t claimed = claimed_locked();
  if (claimed + min_bytes > total_)
    throw std::invalid_argument(
        "KV memory: model '" + name + "' needs a guaranteed " + std::to_string(min_bytes >> 10) +
        " KiB but only " + std::to_string((total_ - claimed) >> 10) + " KiB of the " +
        std::to_string(total_ >> 10) + " KiB budget are not claimed by the other models");
  const int id = next_id_++;
  members_[id] = Member{std::move(name), min_bytes, 0};
  peak_ = std::max(peak_, claimed_locked());
  return id;
}

void KvMemoryLedger::remove_member(int id) {
  std::lock_guard lock(mu_);
  members_.erase(id);
}

size_t KvMemoryLedger::headroom_locked(const Member& m) const {
  // Below its minimum a member grows into bytes already counted as claimed; above, into the
  // unclaimed rest.
  const size_t own = m.min_bytes > m.committed_bytes ? m.min_bytes - m.committed_bytes : 0;
  return own + (total_ - claimed_locked());
}

size_t KvMemoryLedger::headroom(int id) const {
  std::lock_guard lock(mu_);
  return headroom_locked(members_.at(id));
}

size_t KvMemoryLedger::reserve(int id, size_t want, size_t unit) {
  if (unit == 0) throw std::invalid_argument("KvMemoryLedger::reserve: unit of 0 bytes");
  std::lock_guard lock(mu_);
  Member& m = members_.at(id);
  const size_t units = std::min(want, headroom_locked(m)) / unit;
  m.committed_bytes += units * unit;
  peak_ = std::max(peak_, claimed_locked());
  return units * unit;
}

void KvMemoryLedger::release(int id, size_t bytes) {
  std::lock_guard lock(mu_);
  Member& m = members_.at(id);
  if (bytes > m.committed_bytes)
    throw std::logic_error("KvMemoryLedger::release: more bytes than the member holds");
  m.committed_bytes -= bytes;
}

std::vector<KvMemoryLedger::Member> KvMemoryLedger::members() const {
  std::lock_guard lock(mu_);
  std::vector<Member> out;
  for (const auto& [id, m] : members_) out.push_back(m);
  return out;
}

size_t KvMemoryLedger::claimed_bytes() const {
  std::lock_guard lock(mu_);
  return claimed_locked();
}

size_t KvMemoryLedger::committed_bytes() const {
  std::lock_guard lock(mu_);
  size_t sum = 0;
  for (const auto& [id, m] : members_) sum += m.committed_bytes;
  return sum;
}

size_t KvMemoryLedger::peak_claimed_bytes() const {
  std::lock_guard lock(mu_);
  return peak_;
}

KvBudgetAccount::KvBudgetAccount(std::shared_ptr<KvMemoryLedger> ledger, std::string name,
                                 size_t min_bytes, size_t block_bytes)
    : ledger_(std::move(ledger)), min_bytes_(min_bytes), block_bytes_(block_bytes) {
  if (!ledger_) throw std::invalid_argument("KvBudgetAccount: no ledger");
  if (block_bytes == 0) throw std::invalid_argument("KvBudgetAccount: blocks of 0 bytes");
  id_ = ledger_->add_member(std::move(name), min_bytes);
}

KvBudgetAccount::~KvBudgetAccount() {
  ledger_->remove_member(id_);
}

int64_t KvBudgetAccount::reserve_blocks(int64_t want) {
  if (want <= 0) return 0;
  return int64_t(ledger_->reserve(id_, size_t(want) * block_bytes_, block_bytes_) / block_bytes_);
}

int64_t KvBudgetAccount::headroom_blocks() const {
  return int64_t(ledger_->headroom(id_) / block_bytes_);
}

void KvBudgetAccount::release_blocks(int64_t n) {
  if (n > 0) ledger_->release(id_, size_t(n) * block_bytes_);
}

}  // namespace shrike::kv
