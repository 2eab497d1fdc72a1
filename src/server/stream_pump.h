// The stream writer of `shrike serve`: one epoll thread writes every streaming response, so an open
// stream holds a socket, a buffer and its engine request, never a thread. A worker answers the
// request's head and hands the connection here (ConnectionFront::Outcome::Taken); the engine
// wakes the pump when a stream has new events (RequestStream::set_listener); the pump frames them
// as HTTP chunks and writes what the socket takes, waiting for room with EPOLLOUT instead of a
// blocked write. A client that closes, or stops reading for write_timeout, ends its request.
// When a stream ends its connection goes back to the front for the next keep-alive request.
// A non-streaming answer is written here too (Framing::Whole), once the engine has finished it,
// so a request waiting in a model's queue holds no thread either.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace shrike::server {

// One response body the pump writes; called on the pump's thread only.
class PumpedStream {
 public:
  virtual ~PumpedStream() = default;
  // From now on `wake` is to be called (from any thread; it never blocks) whenever poll() may
  // have more to give. nullptr: no more calls.
  virtual void listen(std::function<void()> wake) = 0;
  // Appends the body bytes ready now (unframed); true once the body is complete (its last bytes
  // appended by this call or an earlier one).
  virtual bool poll(std::string& body) = 0;
  // The client went away or stopped reading: end the work behind the stream.
  virtual void abandon() = 0;
};

struct PumpLimits {
  // How long a write may wait for the client to read before the stream is abandoned.
  std::chrono::milliseconds write_timeout{10000};
  // After this much silence, `keep_alive_body` is written: writing is the only way to notice a
  // client that vanished without closing while its request waits or prefills.
  std::chrono::milliseconds keep_alive_every{1000};
  std::string keep_alive_body = ": keep-alive\n\n";
};

class StreamPump {
 public:
  // Where a connection goes after its stream: back to the front with the bytes of the requests
  // the client already sent after this one (keep-alive), or closed.
  using GiveBack = std::function<void(int fd, std::string pending)>;
  using Release = std::function<void(int fd)>;

  StreamPump(PumpLimits limits, GiveBack give_back, Release release);
  ~StreamPump();  // stop()
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  // Starts the thread. Throws std::runtime_error when it cannot.
  void start();
  // How a stream's bytes go out.
  enum class Framing {
    Chunked,  // the response head is written: the bytes are the body, sent as HTTP/1.1 chunks
    Whole,    // the bytes are the whole response, head included, sent as they are
  };
  // Takes `fd` (non-blocking) and writes `stream`'s bytes. From any thread. After stop(), the
  // stream is abandoned and `fd` released.
  void add(int fd, std::shared_ptr<PumpedStream> stream, Framing framing, bool keep_alive,
           std::string pending);
  // Abandons every stream, releases its connection and joins the thread. Idempotent.
  void stop();
  // Streams being written now.
  int64_t streams() const { return count_.load(); }

 private:
  struct Entry;
  struct Wakeups;
  struct Added {
    int fd;
    std::shared_ptr<PumpedStream> stream;
    Framing framing;
    bool keep_alive;
    std::string pending;
  };
  void loop();
  void take_added();
  void take_ready();
  void poll_stream(Entry& e);
  void flush(Entry& e);
  void finish(Entry& e);
  void abandon(Entry& e);
  void remove(Entry& e);
  void sweep();

  PumpLimits limits_;
  GiveBack give_back_;
  Release release_;
  int epoll_fd_ = -1;
  std::shared_ptr<Wakeups> wakeups_;  // shared with the listeners, which may outlive the pump
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool started_ = false, stopped_ = false;
  std::atomic<int64_t> count_{0};

  std::mutex add_mu_;
  std::vector<Added> added_;

  // The pump thread's own.
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> entries_;
  uint64_t next_id_ = 1;  // 0 is the wake-up descriptor's
};

}  // namespace shrike::server
