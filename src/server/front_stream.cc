#include "server/front_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace shrike::server {
namespace {

// "ip", port of a socket address (IPv4 or IPv6); empty and 0 otherwise.
void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  ip.clear();
  port = 0;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    if (inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text)) ip = text;
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text)) ip = text;
    port = ntohs(v6.sin6_port);
  }
}

}  // namespace

bool FrontStream::wait_writable() const {
  pollfd p{fd_, POLLOUT, 0};
  while (true) {
    const int r = ::poll(&p, 1, int(write_timeout_.count()));
    if (r < 0 && errno == EINTR) continue;
    return r > 0 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP));
  }
}

bool FrontStream::is_writable() const {
  if (!wait_writable()) return false;
  // A peer that closed its side shows as readable with nothing to read.
  char c;
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

ssize_t FrontStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, end_ - pos_);
  std::memcpy(ptr, buf_.data() + pos_, n);
  pos_ += n;
  return ssize_t(n);
}

ssize_t FrontStream::write(const char* ptr, size_t size) {
  if (discard_) return ssize_t(size);
  while (true) {
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (!wait_writable()) return -1;  // the client has not read for write_timeout: give up
  }
}

void FrontStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) return address_of(a, ip, port);
  ip.clear();
  port = 0;
}

void FrontStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) return address_of(a, ip, port);
  ip.clear();
  port = 0;
}

}  // namespace shrike::server
