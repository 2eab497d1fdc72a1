// The httplib::Stream a worker answers one request through: reads come from the bytes the
// connection front already holds (the request is complete, so a worker never waits for a client
// to send), writes go to the socket and wait at most `write_timeout` for room each time, so a
// client that stops reading a stream makes the write fail, which ends (cancels) its request.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <string>

namespace shrike::server {

class FrontStream : public httplib::Stream {
 public:
  // Reads see the first `end` bytes of `buf`: the request, as the front framed it.
  FrontStream(int fd, const std::string& buf, size_t end, std::chrono::milliseconds write_timeout)
      : fd_(fd), buf_(buf), end_(std::min(end, buf.size())), write_timeout_(write_timeout) {}

  bool is_readable() const override { return pos_ < end_; }
  bool is_writable() const override;
  // From the request's bytes only; 0 (end of stream) past them.
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }
  // From now on writes succeed without sending anything: the answer is sent by someone else
  // (the stream pump, once the engine has finished it) and httplib's own is dropped.
  void discard_writes() { discard_ = true; }

 private:
  bool wait_writable() const;

  int fd_;
  const std::string& buf_;
  size_t end_;
  size_t pos_ = 0;
  bool discard_ = false;
  std::chrono::milliseconds write_timeout_;
};

}  // namespace shrike::server
