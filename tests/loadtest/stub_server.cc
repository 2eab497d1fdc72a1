#include "stub_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <stdexcept>

namespace shrike::loadtest::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  std::string in, out;
  bool responding = false, stream = false, chat = false;
  int sent_tokens = 0;
  uint64_t gen = 0;  // bumps per response so stale timers are ignored
  Clock::time_point t0;
};

struct Timer {
  Clock::time_point at;
  int fd;
  uint64_t gen;
  bool operator>(const Timer& o) const { return at > o.at; }
};

std::string chunk(const std::string& s) {
  char len[32];
  std::snprintf(len, sizeof len, "%zx\r\n", s.size());
  return len + s + "\r\n";
}

std::string token_event(bool chat, int k) {
  nlohmann::json j;
  const std::string text = " tok" + std::to_string(k);
  if (chat)
    j = {{"choices", {{{"index", 0}, {"delta", {{"content", text}}}}}}};
  else
    j = {{"choices", {{{"index", 0}, {"text", text}}}}};
  return "data: " + j.dump() + "\n\n";
}

}  // namespace

StubServer::StubServer(StubScript script) : script_(script) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listen_fd_, (sockaddr*)&a, sizeof a) != 0 || listen(listen_fd_, 4096) != 0)
    throw std::runtime_error("stub server: cannot listen on 127.0.0.1");
  socklen_t len = sizeof a;
  getsockname(listen_fd_, (sockaddr*)&a, &len);
  port_ = ntohs(a.sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  for (int fd : {listen_fd_, timer_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  thread_ = std::thread([this] { loop(); });
}

StubServer::~StubServer() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
  }
  thread_.join();
  for (int fd : {listen_fd_, epoll_fd_, timer_fd_, wake_fd_}) close(fd);
}

void StubServer::loop() {
  std::map<int, Conn> conns;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers;
  int active = 0;
  uint64_t next_gen = 0;  // global, so a reused fd never matches an old timer

  auto flush = [&](int fd, Conn& c) {
    while (!c.out.empty()) {
      const ssize_t n = send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      c.out.erase(0, n);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | (c.out.empty() ? 0u : (uint32_t)EPOLLOUT);
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  };
  auto close_conn = [&](int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    if (it->second.responding) --active;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    conns.erase(it);
  };
  auto at = [&](Conn& c, double ms) {
    return c.t0 + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double, std::milli>(ms));
  };
  // Parses one complete request from c.in, if there is one, and starts answering it.
  auto handle = [&](int fd, Conn& c) {
    if (c.responding) return;
    const auto hdr_end = c.in.find("\r\n\r\n");
    if (hdr_end == std::string::npos) return;
    size_t content_length = 0;
    std::string head = c.in.substr(0, hdr_end);
    for (auto& ch : head) ch = std::tolower((unsigned char)ch);
    if (auto p = head.find("content-length:"); p != std::string::npos)
      content_length = std::stoul(head.substr(p + 15));
    if (c.in.size() < hdr_end + 4 + content_length) return;
    const std::string raw = c.in.substr(hdr_end + 4, content_length);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bodies_.push_back(raw);
    }
    const auto body = nlohmann::json::parse(raw, nullptr, false);
    c.chat = head.find("/v1/chat/completions") != std::string::npos;
    c.in.erase(0, hdr_end + 4 + content_length);
    const int64_t n = ++requests_;
    c.t0 = Clock::now();
    int status = script_.status;
    if (script_.fail_every > 0 && n % script_.fail_every == 0) status = script_.fail_status;
    if (script_.hang) return;
    if (status != 200) {
      const std::string b = "{\"error\":{\"message\":\"scripted " + std::to_string(status) + "\"}}";
      c.out += "HTTP/1.1 " + std::to_string(status) +
               " Scripted\r\nContent-Type: application/json\r\n"
               "Content-Length: " +
               std::to_string(b.size()) + "\r\n\r\n" + b;
      flush(fd, c);
      return;
    }
    c.stream = body.is_object() && body.value("stream", false);
    c.responding = true;
    c.sent_tokens = 0;
    c.gen = ++next_gen;
    max_concurrent_ = std::max(max_concurrent_.load(), ++active);
    if (c.stream) {
      c.out +=
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
          "chunked\r\n\r\n";
      flush(fd, c);
      timers.push({at(c, script_.first_token_ms), fd, c.gen});
    } else {
      timers.push(
          {at(c, script_.first_token_ms + (script_.tokens - 1) * script_.gap_ms), fd, c.gen});
    }
  };
  auto usage_json = [&]() {
    return nlohmann::json{{"prompt_tokens", 7},
                          {"completion_tokens", script_.tokens},
                          {"total_tokens", 7 + script_.tokens}};
  };
  // Sends the next scripted piece of c's response.
  auto step = [&](int fd, Conn& c) {
    if (!c.stream) {
      nlohmann::json j = {{"choices", {{{"index", 0}, {"text", "done"}}}}};
      if (c.chat)
        j = {{"choices",
              {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "done"}}}}}}};
      if (script_.usage) j["usage"] = usage_json();
      const auto b = j.dump();
      c.out += "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(b.size()) + "\r\n\r\n" + b;
      c.responding = false;
      --active;
    } else {
      std::string events = token_event(c.chat, c.sent_tokens++);
      if (c.sent_tokens >= script_.tokens) {
        if (script_.usage)
          events +=
              "data: " +
              nlohmann::json{{"choices", nlohmann::json::array()}, {"usage", usage_json()}}.dump() +
              "\n\n";
        events += "data: [DONE]\n\n";
        c.out += chunk(events) + "0\r\n\r\n";
        c.responding = false;
        --active;
      } else {
        c.out += chunk(events);
        timers.push({at(c, script_.first_token_ms + c.sent_tokens * script_.gap_ms), fd, c.gen});
      }
    }
    flush(fd, c);
    if (!c.responding) handle(fd, c);
  };

  std::vector<epoll_event> evs(512);
  char buf[65536];
  while (true) {
    // Arm the timerfd for the earliest deadline (absolute, so no drift).
    itimerspec its{};
    if (!timers.empty()) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(timers.top().at.time_since_epoch())
              .count();
      its.it_value.tv_sec = ns / 1000000000;
      its.it_value.tv_nsec = ns % 1000000000;
      if (ns <= 0) its.it_value.tv_nsec = 1;
    }
    timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
    const int n = epoll_wait(epoll_fd_, evs.data(), (int)evs.size(), -1);
    if (n < 0 && errno != EINTR) break;
    bool stop = false;
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == wake_fd_) {
        stop = true;
      } else if (fd == listen_fd_) {
        while (true) {
          const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          int one = 1;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          ++connections_;
          conns[c];
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = c;
          epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c, &ev);
        }
      } else if (fd == timer_fd_) {
        uint64_t expirations;
        if (read(timer_fd_, &expirations, sizeof expirations) < 0) {
        }
      } else if (auto it = conns.find(fd); it != conns.end()) {
        if (evs[i].events & EPOLLOUT) flush(fd, it->second);
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          bool closed = false;
          while (true) {
            const ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r > 0) {
              it->second.in.append(buf, r);
            } else {
              closed = r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
              break;
            }
          }
          if (closed) {
            close_conn(fd);
            continue;
          }
          handle(fd, it->second);
        }
      }
    }
    if (stop) break;
    const auto now = Clock::now();
    while (!timers.empty() && timers.top().at <= now) {
      const Timer t = timers.top();
      timers.pop();
      auto it = conns.find(t.fd);
      if (it != conns.end() && it->second.gen == t.gen && it->second.responding)
        step(t.fd, it->second);
    }
  }
  for (auto& [fd, c] : conns) close(fd);
}

}  // namespace shrike::loadtest::testing
