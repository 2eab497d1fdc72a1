#include "engine/request.h"

#include <utility>

namespace shrike::engine {

bool RequestStream::next(StreamEvent& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (consumed_done_) return false;
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  out = std::move(events_.front());
  events_.pop_front();
  if (out.finished) consumed_done_ = true;
  return true;
}

void RequestStream::push(StreamEvent ev) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = ev.finished;
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

}  // namespace shrike::engine
