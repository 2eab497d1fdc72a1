// The connection front of `shrike serve`: one epoll thread holds every open connection while its
// request is arriving or while it idles between keep-alive requests, and hands a worker thread
// only a connection whose request is complete (request_framer.h). A client that sends its head a
// byte at a time, never finishes its body, or opens thousands of connections and says nothing
// therefore costs a file descriptor and a buffer, never a worker, and is cut off by whole-request
// deadlines (not per-read timeouts). Beyond max_connections the oldest connection not being
// served is closed to make room; when every connection is being served the new one is refused.
// No HTTP beyond framing happens here: the worker callback parses and answers the request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/request_framer.h"

namespace shrike::server {

struct FrontLimits {
  FrameLimits frame;
  double header_timeout_s = 10;     // from a request's first byte (or the accept) to its head's end
  double body_timeout_s = 30;       // from the head's end to the body's end
  double keep_alive_timeout_s = 5;  // idle between two requests of one connection
  size_t max_connections = 4096;    // open at once, served or not
  size_t max_keep_alive_requests = 1000;
  // SO_SNDBUF of each connection (0: the kernel's autotuning, up to 4 MiB on Linux): what a
  // client that stops reading leaves queued before writes wait (and time out).
  size_t send_buffer_bytes = 0;
  int workers = 64;  // threads answering complete requests
  // GET requests for these paths (probes: readiness, liveness, metrics) are answered by threads
  // of their own, so a load balancer's health check never waits behind a burst of requests
  // being parsed and submitted (streams and answers being generated hold no worker:
  // stream_pump.h).
  std::vector<std::string> probe_paths;
  int probe_workers = 2;
};

// Counts since start, for /metrics.
struct FrontCounters {
  int64_t open = 0;       // connections open now (held by the front or a worker)
  int64_t timed_out = 0;  // closed with 408: head or body not complete in time
  int64_t refused = 0;    // refused with 503: over max_connections, none could be closed
  int64_t evicted = 0;    // closed to make room for a new connection
  int64_t rejected = 0;   // closed with 400/413/414/431: the framing broke a rule or a limit
};

class ConnectionFront {
 public:
  // What became of a connection after its request was answered.
  enum class Outcome {
    Keep,   // answered: read its next request
    Close,  // answered (or failed): close it
    Taken,  // still being answered elsewhere (a stream, stream_pump.h): resume() or release() it
  };
  // Runs on a worker: parses and answers the request held by the first `request_bytes` bytes of
  // `buf` (complete, as the framer delimited it: the handler's parser reads no further, so it
  // cannot take a pipelined request for a body) and erases them; writes to `fd`. Close when
  // the write failed or the request said Connection: close; `last` asks for Close (or a
  // release() after Taken).
  using Handler = std::function<Outcome(int fd, std::string& buf, size_t request_bytes, bool last)>;
  // The body of an error the front answers itself (status, what was wrong): JSON.
  using ErrorBody = std::function<std::string(int status, const std::string& message)>;

  ConnectionFront(FrontLimits limits, Handler handler, ErrorBody error_body);
  ~ConnectionFront();  // stop()
  ConnectionFront(const ConnectionFront&) = delete;
  ConnectionFront& operator=(const ConnectionFront&) = delete;

  // Starts the epoll thread and the workers. Throws std::runtime_error when it cannot.
  void start();
  // Takes an accepted socket (from any thread); the front owns and closes it from now on.
  void adopt(int fd);
  // A connection the handler Took is answered: read its next request (`pending`: bytes of it
  // already read), or close it. From any thread; closes it after stop().
  void resume(int fd, std::string pending);
  void release(int fd);
  // Closes every connection the front holds, lets workers finish their current request, joins
  // all threads (connections Taken are their taker's to release). Idempotent.
  void stop();

  FrontCounters counters() const;

 private:
  struct Conn;
  struct Job {
    int fd = -1;
    std::string buf;
    size_t request_bytes = 0;  // the complete request at the start of buf
    size_t served = 0;         // requests answered on this connection before
  };
  // Complete requests waiting for a worker: one lane for probes, one for the rest.
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job> jobs;
  };
  void loop();
  void worker(Lane& lane);
  bool is_probe(const std::string& buf) const;
  void wake();
  void on_readable(Conn& c);
  bool progress(Conn& c);  // false: c is no longer the front's (handed to a worker)
  void reply_and_linger(Conn& c, int status, const std::string& message);
  void close_conn(int fd);
  void make_room();
  void sweep();
  void take_handoffs();

  FrontLimits limits_;
  Handler handler_;
  ErrorBody error_body_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread loop_thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool started_ = false, stopped_ = false;

  // Held by the epoll thread only.
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;
  std::map<uint64_t, int> by_age_;  // Conn::seq -> fd: the first is the one to evict
  uint64_t next_seq_ = 0;

  // Sockets accepted and connections workers gave back, for the epoll thread.
  std::mutex handoff_mu_;
  std::vector<int> adopted_;
  std::vector<Job> returned_;
  std::unordered_map<int, size_t> taken_;  // fd -> requests answered on it, with the one Taken

  Lane ready_, probes_;

  std::atomic<int64_t> busy_{0};  // connections a worker has (queued or answering)
  std::atomic<int64_t> open_{0}, timed_out_{0}, refused_{0}, evicted_{0}, rejected_{0};
};

}  // namespace shrike::server
