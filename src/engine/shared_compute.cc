#include "engine/shared_compute.h"

namespace shrike::engine {

SharedCompute::SharedCompute(int threads) : pool_(threads > 0 ? threads : default_thread_count()) {}

SharedCompute::Turn::Turn(SharedCompute& c) : c_(c) {
  std::unique_lock lock(c_.mu_);
  const uint64_t ticket = c_.next_ticket_++;
  if (ticket != c_.serving_) {
    ++c_.waited_;
    c_.cv_.wait(lock, [&] { return c_.serving_ == ticket; });
  }
}

SharedCompute::Turn::Turn(SharedCompute& c, bool& taken) : c_(c) {
  std::lock_guard lock(c_.mu_);
  taken = held_ = c_.next_ticket_ == c_.serving_;
  if (held_) ++c_.next_ticket_;
}

SharedCompute::Turn::~Turn() {
  if (!held_) return;
  {
    std::lock_guard lock(c_.mu_);
    ++c_.serving_;
  }
  c_.cv_.notify_all();
}

SharedCompute::Solo::Solo(SharedCompute& c) : c_(c) {
  std::lock_guard lock(c_.mu_);
  ++c_.solos_;
  c_.pool_.set_helpers(c_.pool_.size() - 1 - c_.solos_);
}

SharedCompute::Solo::~Solo() {
  std::lock_guard lock(c_.mu_);
  --c_.solos_;
  c_.pool_.set_helpers(c_.pool_.size() - 1 - c_.solos_);
}

int64_t SharedCompute::waited_turns() const {
  std::lock_guard lock(mu_);
  return waited_;
}

}  // namespace shrike::engine
