// Running `shrike serve` from a test: start it on a free port, wait until it says it listens,
// signal it, collect its exit code; plus a raw-socket HTTP exchange for requests no well-behaved
// client library would send.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_shrike.h"

namespace shrike::testing {

// Reads a whole file (the server's stderr log so far).
inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!log_.empty()) std::filesystem::remove(log_);
  }

  // Starts `shrike serve ARGS --port 0` and waits (up to timeout) for "listening on
  // http://HOST:PORT". False (see log()) when it exits or never says so.
  bool start(const std::vector<std::string>& args, double timeout_s = 60) {
    static int counter = 0;
    log_ = std::filesystem::temp_directory_path() /
           ("shrike_serve_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".log");
    std::vector<std::string> argv = {SHRIKE_BINARY, "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--port", "0"});
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 2);
        dup2(fd, 1);
        close(fd);
      }
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
    while (std::chrono::steady_clock::now() < deadline) {
      if (const int port = listening_port(log()); port > 0) {
        port_ = port;
        return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // The port of "listening on http://HOST:PORT" in the log, or 0.
  static int listening_port(const std::string& log) {
    const std::string marker = "listening on http://";
    const size_t at = log.find(marker);
    if (at == std::string::npos) return 0;
    const size_t colon = log.find(':', at + marker.size());
    const size_t end = log.find('\n', at);
    if (colon == std::string::npos || end == std::string::npos || colon > end) return 0;
    return std::atoi(log.substr(colon + 1, end - colon - 1).c_str());
  }
  std::string log() const { return read_text_file(log_); }
  void signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }

  // Exit code once it exits within timeout; -1 when it did not (it is then killed) or died of a
  // signal.
  int wait_exit(double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
    while (pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::filesystem::path log_;
};

// A TCP connection to 127.0.0.1:port for hand-written requests.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
    }
    if (fd_ >= 0) {
      timeval tv{10, 0};  // no test waits longer for a byte
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
  }
  ~RawConnection() { close_now(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool send_all(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  }
  // Appends what arrives until `until` appears in the data, the peer closes, or a read times out.
  std::string read_until(const std::string& until) {
    std::string out;
    char buf[4096];
    while (out.find(until) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    return out;
  }
  // What one read returns (empty: the peer closed, or the read timed out).
  std::string read_some() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
  }
  void close_now() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The status code of a raw HTTP response ("HTTP/1.1 413 ..."), or 0.
inline int raw_status(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.substr(9, 3).c_str());
}

// The body of the first raw, non-chunked response in `response` (its Content-Length bytes).
inline std::string raw_body(const std::string& response) {
  const size_t p = response.find("\r\n\r\n");
  if (p == std::string::npos) return std::string();
  const std::string marker = "\r\nContent-Length: ";
  const size_t cl = response.find(marker);
  if (cl == std::string::npos || cl > p) return response.substr(p + 4);
  return response.substr(p + 4, size_t(std::atoll(response.c_str() + cl + marker.size())));
}

}  // namespace shrike::testing
