#include "server/stream_pump.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace shrike::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kWakeId = 0;
constexpr auto kSweepEvery = std::chrono::milliseconds(50);

// One HTTP/1.1 chunk: size in hex, the bytes, CRLF.
void append_chunk(std::string& out, const std::string& data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out += size;
  out += data;
  out += "\r\n";
}

}  // namespace

// Stream ids the engine side marked as having news, and the descriptor that wakes the pump.
// Listeners hold it by shared_ptr: an engine may push an event after its stream left the pump.
struct StreamPump::Wakeups {
  Wakeups() : fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Wakeups() {
    if (fd >= 0) ::close(fd);
  }
  void mark(uint64_t id) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      first = ready.empty();
      ready.push_back(id);
    }
    if (first) ring();
  }
  void ring() const {
    const uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
  }
  int fd;
  std::mutex mu;
  std::vector<uint64_t> ready;
};

struct StreamPump::Entry {
  uint64_t id = 0;
  int fd = -1;
  std::shared_ptr<PumpedStream> stream;
  Framing framing = Framing::Chunked;
  bool keep_alive = false;
  std::string pending;  // the client's next request(s), already read by the front
  std::string out;      // framed bytes not yet written
  size_t written = 0;   // of out
  bool body_done = false;
  bool waiting_room = false;  // EPOLLOUT armed: the socket's buffer was full
  Clock::time_point last_write, stuck_since;
};

StreamPump::StreamPump(PumpLimits limits, GiveBack give_back, Release release)
    : limits_(std::move(limits)),
      give_back_(std::move(give_back)),
      release_(std::move(release)),
      wakeups_(std::make_shared<Wakeups>()) {}

StreamPump::~StreamPump() {
  stop();
}

void StreamPump::start() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (started_) return;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0 || wakeups_->fd < 0)
    throw std::runtime_error(std::string("cannot create the stream writer: ") +
                             std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wakeups_->fd, &ev);
  started_ = true;
  thread_ = std::thread([this] { loop(); });
}

void StreamPump::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!started_ || stopped_) return;
  {
    std::lock_guard<std::mutex> add_lock(add_mu_);  // add() sees it, or has queued its stream
    stopping_.store(true);
  }
  wakeups_->ring();
  thread_.join();
  take_added();  // queued after the loop's last turn: abandoned below with the rest
  while (!entries_.empty()) abandon(*entries_.begin()->second);
  ::close(epoll_fd_);
  stopped_ = true;
}

void StreamPump::add(int fd, std::shared_ptr<PumpedStream> stream, Framing framing, bool keep_alive,
                     std::string pending) {
  {
    std::lock_guard<std::mutex> lock(add_mu_);
    if (!stopping_.load()) {
      added_.push_back({fd, std::move(stream), framing, keep_alive, std::move(pending)});
      count_.fetch_add(1);
      wakeups_->ring();
      return;
    }
  }
  stream->abandon();
  release_(fd);
}

void StreamPump::loop() {
  epoll_event events[256];
  auto next_sweep = Clock::now() + kSweepEvery;
  while (!stopping_.load()) {
    const int n = epoll_wait(epoll_fd_, events, 256, int(kSweepEvery.count()));
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        uint64_t v;
        (void)!::read(wakeups_->fd, &v, sizeof v);
        take_added();
        take_ready();
        continue;
      }
      const auto it = entries_.find(id);
      if (it == entries_.end()) continue;
      Entry& e = *it->second;
      if (events[i].events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
        abandon(e);  // the client closed: nobody to write to
      else if (events[i].events & EPOLLOUT)
        flush(e);
    }
    if (Clock::now() >= next_sweep) {
      sweep();
      next_sweep = Clock::now() + kSweepEvery;
    }
  }
}

void StreamPump::take_added() {
  std::vector<Added> added;
  {
    std::lock_guard<std::mutex> lock(add_mu_);
    added.swap(added_);
  }
  const auto now = Clock::now();
  for (Added& a : added) {
    auto e = std::make_unique<Entry>();
    e->id = next_id_++;
    e->fd = a.fd;
    e->stream = std::move(a.stream);
    e->framing = a.framing;
    e->keep_alive = a.keep_alive;
    e->pending = std::move(a.pending);
    e->last_write = now;
    // Only the client's hang-up is watched: bytes it sends meanwhile (a pipelined request) stay
    // in the socket for the front to read once this stream ends.
    epoll_event ev{};
    ev.events = EPOLLRDHUP;
    ev.data.u64 = e->id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, e->fd, &ev);
    Entry& ref = *e;
    entries_[e->id] = std::move(e);
    const std::shared_ptr<Wakeups> wakeups = wakeups_;
    const uint64_t id = ref.id;
    ref.stream->listen([wakeups, id] { wakeups->mark(id); });
    poll_stream(ref);  // events may have come before the listener
  }
}

void StreamPump::take_ready() {
  std::vector<uint64_t> ready;
  {
    std::lock_guard<std::mutex> lock(wakeups_->mu);
    ready.swap(wakeups_->ready);
  }
  for (const uint64_t id : ready)
    if (const auto it = entries_.find(id); it != entries_.end()) poll_stream(*it->second);
}

void StreamPump::poll_stream(Entry& e) {
  if (e.body_done) return;
  std::string body;
  const bool done = e.stream->poll(body);
  const bool chunked = e.framing == Framing::Chunked;
  if (!body.empty()) {
    if (chunked)
      append_chunk(e.out, body);
    else
      e.out += body;
  }
  if (done) {
    if (chunked) e.out += "0\r\n\r\n";
    e.body_done = true;
  }
  if (!body.empty() || done) flush(e);
}

void StreamPump::flush(Entry& e) {
  const auto now = Clock::now();
  while (e.written < e.out.size()) {
    const ssize_t n = ::send(e.fd, e.out.data() + e.written, e.out.size() - e.written,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      e.written += size_t(n);
      e.stuck_since = now;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!e.waiting_room) {
        e.waiting_room = true;
        e.stuck_since = now;
        epoll_event ev{};
        ev.events = EPOLLRDHUP | EPOLLOUT;
        ev.data.u64 = e.id;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, e.fd, &ev);
      }
      return;
    }
    return abandon(e);  // the connection failed
  }
  e.out.clear();
  e.written = 0;
  e.last_write = now;
  if (e.waiting_room) {
    e.waiting_room = false;
    epoll_event ev{};
    ev.events = EPOLLRDHUP;
    ev.data.u64 = e.id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, e.fd, &ev);
  }
  if (e.body_done) finish(e);
}

void StreamPump::sweep() {
  const auto now = Clock::now();
  std::vector<Entry*> stuck, silent;
  for (auto& [id, e] : entries_) {
    if (e->waiting_room && now - e->stuck_since >= limits_.write_timeout)
      stuck.push_back(e.get());
    else if (e->framing == Framing::Chunked && e->out.empty() && !e->body_done &&
             now - e->last_write >= limits_.keep_alive_every)
      silent.push_back(e.get());
  }
  for (Entry* e : stuck) abandon(*e);
  for (Entry* e : silent) {
    append_chunk(e->out, limits_.keep_alive_body);
    flush(*e);
  }
}

void StreamPump::finish(Entry& e) {
  const int fd = e.fd;
  const bool keep_alive = e.keep_alive;
  std::string pending = std::move(e.pending);
  remove(e);
  if (keep_alive)
    give_back_(fd, std::move(pending));
  else
    release_(fd);
}

void StreamPump::abandon(Entry& e) {
  e.stream->abandon();
  const int fd = e.fd;
  remove(e);
  release_(fd);
}

void StreamPump::remove(Entry& e) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, e.fd, nullptr);
  e.stream->listen(nullptr);
  count_.fetch_sub(1);
  entries_.erase(e.id);  // e is gone from here on
}

}  // namespace shrike::server
