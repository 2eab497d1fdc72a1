#include "engine/request.h"

#include <utility>

namespace shrike::engine {

bool RequestStream::next(StreamEvent& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (consumed_done_) return false;
  // No wait asked: no condition-variable wait either, which even with an expired deadline is a
  // futex call that can give up the CPU (an event loop polling many streams would crawl).
  if (timeout.count() <= 0 ? events_.empty()
                           : !cv_.wait_for(lock, timeout, [&] { return !events_.empty(); }))
    return false;
  out = std::move(events_.front());
  events_.pop_front();
  if (out.finished) consumed_done_ = true;
  return true;
}

void RequestStream::push(StreamEvent ev) {
  std::shared_ptr<const std::function<void()>> listener;
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = ev.finished;
    events_.push_back(std::move(ev));
    listener = listener_;
  }
  cv_.notify_all();
  if (listener) (*listener)();
}

void RequestStream::set_listener(std::function<void()> listener) {
  std::shared_ptr<const std::function<void()>> now;
  {
    std::lock_guard lock(mu_);
    listener_ =
        listener ? std::make_shared<const std::function<void()>>(std::move(listener)) : nullptr;
    if (!events_.empty()) now = listener_;
  }
  // Events pushed before the listener was set would otherwise go unnoticed.
  if (now) (*now)();
}

}  // namespace shrike::engine
