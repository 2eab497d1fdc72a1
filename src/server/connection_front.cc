#include "server/connection_front.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace shrike::server {
namespace {

using Clock = std::chrono::steady_clock;

// How long a connection refused with an error is still read (and the bytes dropped) after the
// answer, so that closing it with unread data does not reset it before the client has read why.
constexpr auto kLinger = std::chrono::seconds(2);
constexpr auto kSweepEvery = std::chrono::milliseconds(50);
constexpr size_t kAdoptPerTurn = 64;

// "10 s", "2.5 s": a limit as the option was given.
std::string in_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// Best effort: the answer is small and the socket's buffer empty, so one send normally takes it.
void send_now(int fd, const std::string& s) {
  (void)::send(fd, s.data(), s.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

enum class Phase { Reading, Idle, Lingering };

struct ConnectionFront::Conn {
  Conn(int f, FrameLimits limits) : fd(f), framer(limits) {}
  int fd;
  std::string buf;
  RequestFramer framer;
  Phase phase = Phase::Reading;
  bool body_started = false;
  Clock::time_point deadline;
  uint64_t seq = 0;  // when its current wait began, in order: the lowest is evicted first
  size_t served = 0;
};

ConnectionFront::ConnectionFront(FrontLimits limits, Handler handler, ErrorBody error_body)
    : limits_(limits), handler_(std::move(handler)), error_body_(std::move(error_body)) {}

ConnectionFront::~ConnectionFront() {
  stop();
}

void ConnectionFront::start() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (started_) return;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0)
    throw std::runtime_error(std::string("cannot create the connection front: ") +
                             std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  started_ = true;
  loop_thread_ = std::thread([this] { loop(); });
  for (int i = 0; i < std::max(1, limits_.workers); ++i)
    workers_.emplace_back([this] { worker(ready_); });
  if (!limits_.probe_paths.empty())
    for (int i = 0; i < std::max(1, limits_.probe_workers); ++i)
      workers_.emplace_back([this] { worker(probes_); });
}

void ConnectionFront::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!started_ || stopped_) return;
  {
    std::lock_guard<std::mutex> handoff_lock(handoff_mu_);  // adopt() sees it, or is done waking
    stopping_.store(true);
  }
  wake();
  for (Lane* lane : {&ready_, &probes_}) {
    std::lock_guard<std::mutex> ready_lock(lane->mu);
    lane->cv.notify_all();
  }
  loop_thread_.join();
  for (auto& t : workers_) t.join();
  // Whatever was handed over after the loop ended (closed: stopping_ is set).
  while (true) {
    take_handoffs();
    std::lock_guard<std::mutex> handoff_lock(handoff_mu_);
    if (adopted_.empty() && returned_.empty()) break;
  }
  std::lock_guard<std::mutex> handoff_lock(handoff_mu_);
  ::close(epoll_fd_);
  ::close(wake_fd_);
  stopped_ = true;
}

void ConnectionFront::wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void ConnectionFront::adopt(int fd) {
  std::lock_guard<std::mutex> lock(handoff_mu_);
  if (stopping_.load()) {
    ::close(fd);
    return;
  }
  adopted_.push_back(fd);
  wake();
}

void ConnectionFront::resume(int fd, std::string pending) {
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    const auto it = taken_.find(fd);
    if (it != taken_.end() && !stopping_.load()) {
      Job j;
      j.fd = fd;
      j.buf = std::move(pending);
      j.served = it->second;
      taken_.erase(it);
      returned_.push_back(std::move(j));
      wake();
      return;
    }
  }
  release(fd);
}

void ConnectionFront::release(int fd) {
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    taken_.erase(fd);
  }
  ::close(fd);
  open_.fetch_sub(1);
  busy_.fetch_sub(1);
}

FrontCounters ConnectionFront::counters() const {
  return {open_.load(), timed_out_.load(), refused_.load(), evicted_.load(), rejected_.load()};
}

void ConnectionFront::loop() {
  epoll_event events[256];
  auto next_sweep = Clock::now();
  while (!stopping_.load()) {
    const int n = epoll_wait(epoll_fd_, events, 256, int(kSweepEvery.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof v);
        take_handoffs();
        continue;
      }
      const auto it = conns_.find(fd);
      if (it != conns_.end()) on_readable(*it->second);
    }
    if (Clock::now() >= next_sweep) {
      sweep();
      next_sweep = Clock::now() + kSweepEvery;
    }
  }
  for (auto& [fd, c] : conns_) {
    ::close(fd);
    open_.fetch_sub(1);
  }
  conns_.clear();
  by_age_.clear();
}

void ConnectionFront::take_handoffs() {
  std::vector<int> adopted;
  std::vector<Job> returned;
  {
    std::lock_guard<std::mutex> lock(handoff_mu_);
    // A burst of new connections is taken a slice at a time, so that requests already
    // complete are dispatched in between rather than after the whole burst.
    const size_t n = std::min(adopted_.size(), kAdoptPerTurn);
    adopted.assign(adopted_.begin(), adopted_.begin() + ptrdiff_t(n));
    adopted_.erase(adopted_.begin(), adopted_.begin() + ptrdiff_t(n));
    if (!adopted_.empty()) wake();
    returned.swap(returned_);
  }
  const auto now = Clock::now();
  const auto add = [&](std::unique_ptr<Conn> c) -> Conn& {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev);
    Conn& ref = *c;
    by_age_[c->seq] = c->fd;
    conns_[c->fd] = std::move(c);
    return ref;
  };
  for (Job& j : returned) {
    busy_.fetch_sub(1);
    if (stopping_.load()) {
      ::close(j.fd);
      open_.fetch_sub(1);
      continue;
    }
    auto c = std::make_unique<Conn>(j.fd, limits_.frame);
    c->buf = std::move(j.buf);
    c->served = j.served;
    c->phase = Phase::Idle;
    c->deadline = now + seconds(limits_.keep_alive_timeout_s);
    c->seq = next_seq_++;
    Conn& ref = add(std::move(c));
    if (!ref.buf.empty()) progress(ref);  // the client sent its next request already
  }
  for (const int fd : adopted) {
    open_.fetch_add(1);
    if (stopping_.load()) {
      ::close(fd);
      open_.fetch_sub(1);
      continue;
    }
    if (conns_.size() + size_t(busy_.load()) >= limits_.max_connections) make_room();
    if (conns_.size() + size_t(busy_.load()) >= limits_.max_connections) {
      // Every connection is being answered: this one cannot be taken.
      refused_.fetch_add(1);
      const std::string body =
          error_body_(503, "Too many open connections (" + std::to_string(limits_.max_connections) +
                               "); retry later.");
      send_now(fd,
               "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
               "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
      ::close(fd);
      open_.fetch_sub(1);
      continue;
    }
    const int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    const int yes = 1;  // each SSE event is a small write that must leave at once
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    if (limits_.send_buffer_bytes > 0) {
      const int bytes = int(std::min<size_t>(limits_.send_buffer_bytes, 1 << 30));
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    }
    auto c = std::make_unique<Conn>(fd, limits_.frame);
    c->deadline = now + seconds(limits_.header_timeout_s);
    c->seq = next_seq_++;
    add(std::move(c));
  }
}

void ConnectionFront::make_room() {
  if (by_age_.empty()) return;
  // A connection between requests (keep-alive idle, or lingering after an answer) loses nothing
  // when closed, so the oldest of those goes first; only when there is none does the oldest
  // connection still sending its request go. Without this a client that had just closed its
  // keep-alive connection (the server not yet seeing the FIN) cost a new request its connection.
  Conn* oldest = conns_.at(by_age_.begin()->second).get();
  for (const auto& [seq, fd] : by_age_) {
    Conn* c = conns_.at(fd).get();
    if (c->phase != Phase::Reading) {
      oldest = c;
      break;
    }
  }
  evicted_.fetch_add(1);
  if (oldest->phase == Phase::Reading && !oldest->buf.empty()) {
    const std::string body = error_body_(503, "Too many open connections; retry later.");
    send_now(oldest->fd,
             "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
             "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  close_conn(oldest->fd);
}

void ConnectionFront::close_conn(int fd) {
  ::close(fd);  // also leaves the epoll set
  if (const auto it = conns_.find(fd); it != conns_.end()) by_age_.erase(it->second->seq);
  conns_.erase(fd);
  open_.fetch_sub(1);
}

void ConnectionFront::on_readable(Conn& c) {
  char tmp[65536];
  while (true) {
    const ssize_t n = ::recv(c.fd, tmp, sizeof tmp, 0);
    if (n > 0) {
      if (c.phase == Phase::Lingering) continue;
      c.buf.append(tmp, size_t(n));
      if (!progress(c)) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // The peer closed (or the socket failed) before its request was complete: nobody to answer.
    close_conn(c.fd);
    return;
  }
}

bool ConnectionFront::progress(Conn& c) {
  const auto now = Clock::now();
  if (c.phase == Phase::Idle) {
    c.phase = Phase::Reading;
    c.deadline = now + seconds(limits_.header_timeout_s);
  }
  switch (c.framer.advance(c.buf)) {
    case FrameState::NeedHead:
      return true;
    case FrameState::NeedBody:
      if (!c.body_started) {
        c.body_started = true;
        c.deadline = now + seconds(limits_.body_timeout_s);
      }
      if (c.framer.take_continue()) send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
      return true;
    case FrameState::Complete: {
      Job j;
      j.fd = c.fd;
      j.request_bytes = c.framer.request_end();
      j.buf = std::move(c.buf);
      j.served = c.served;
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
      by_age_.erase(c.seq);
      conns_.erase(j.fd);  // c is gone from here on
      busy_.fetch_add(1);
      Lane& lane = is_probe(j.buf) ? probes_ : ready_;
      {
        std::lock_guard<std::mutex> lock(lane.mu);
        lane.jobs.push_back(std::move(j));
      }
      lane.cv.notify_one();
      return false;
    }
    case FrameState::Invalid:
      rejected_.fetch_add(1);
      reply_and_linger(c, c.framer.error_status(), c.framer.error_message());
      return true;  // keep reading: the bytes are dropped while lingering
  }
  return true;
}

void ConnectionFront::reply_and_linger(Conn& c, int status, const std::string& message) {
  const std::string body = error_body_(status, message);
  send_now(c.fd, "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body);
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Phase::Lingering;
  c.buf.clear();
  c.buf.shrink_to_fit();
  c.deadline = Clock::now() + kLinger;
}

void ConnectionFront::sweep() {
  const auto now = Clock::now();
  std::vector<int> expired;
  for (auto& [fd, c] : conns_)
    if (now >= c->deadline) expired.push_back(fd);
  for (const int fd : expired) {
    Conn& c = *conns_.at(fd);
    if (c.phase == Phase::Reading) {
      timed_out_.fetch_add(1);
      reply_and_linger(c, 408,
                       c.body_started ? "The request body did not arrive within " +
                                            in_seconds(limits_.body_timeout_s) + "."
                                      : "The request head did not arrive within " +
                                            in_seconds(limits_.header_timeout_s) + ".");
    } else {
      close_conn(fd);  // idle past the keep-alive timeout, or done lingering
    }
  }
}

bool ConnectionFront::is_probe(const std::string& buf) const {
  // The request line, "GET /path HTTP/1.1" or "GET /path?query ...": the framer has checked it.
  if (buf.rfind("GET ", 0) != 0) return false;
  for (const std::string& path : limits_.probe_paths)
    if (buf.compare(4, path.size(), path) == 0 && buf.size() > 4 + path.size() &&
        (buf[4 + path.size()] == ' ' || buf[4 + path.size()] == '?'))
      return true;
  return false;
}

void ConnectionFront::worker(Lane& lane) {
  while (true) {
    Job j;
    {
      std::unique_lock<std::mutex> lock(lane.mu);
      lane.cv.wait(lock, [&] { return stopping_.load() || !lane.jobs.empty(); });
      if (lane.jobs.empty()) return;
      j = std::move(lane.jobs.front());
      lane.jobs.pop_front();
    }
    Outcome outcome = Outcome::Close;
    if (!stopping_.load()) {
      // Recorded first: the taker may resume the connection before the handler returns.
      std::lock_guard<std::mutex> lock(handoff_mu_);
      taken_[j.fd] = j.served + 1;
    }
    if (!stopping_.load()) {
      try {
        outcome =
            handler_(j.fd, j.buf, j.request_bytes, j.served + 1 >= limits_.max_keep_alive_requests);
      } catch (...) {
        outcome = Outcome::Close;
      }
    }
    if (outcome == Outcome::Taken) continue;  // busy_ and open_ until resume() or release()
    {
      std::lock_guard<std::mutex> lock(handoff_mu_);
      taken_.erase(j.fd);
    }
    ++j.served;
    if (outcome == Outcome::Close || stopping_.load()) {
      ::close(j.fd);
      open_.fetch_sub(1);
      busy_.fetch_sub(1);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(handoff_mu_);
      returned_.push_back(std::move(j));
    }
    wake();
  }
}

}  // namespace shrike::server
