#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/sanitizers.h"
#include "engine/engine.h"
#include "server/api_key.h"
#include "server/connection_front.h"
#include "server/front_stream.h"
#include "server/generation_request.h"
#include "server/openai_protocol.h"
#include "server/stream_pump.h"

namespace shrike::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kJsonType = "application/json";
// How long a stream may stay silent before a comment line is written: writing is the only way to
// notice a client that went away while its request waits or prefills.
constexpr auto kKeepAliveEvery = std::chrono::seconds(1);

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), kJsonType);
}

void send_json(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(dump_json(j), kJsonType);
}

// The route label of the request counters: known routes by name, everything else as "other" so a
// scanner probing random paths cannot grow the metrics without bound.
std::string route_label(const std::string& path, const std::vector<std::string>& added) {
  for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                            "/live", "/metrics", "/admin/models"})
    if (path == known) return known;
  for (const std::string& known : added)  // the routes of layers above (add_route)
    if (path == known) return known;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  if (path.rfind("/admin/models/", 0) == 0) return "/admin/models/{id}";
  return "other";
}

int64_t unix_now() {
  return int64_t(std::time(nullptr));
}

// Counts a request as in progress for the drain while alive.
class InFlight {
 public:
  explicit InFlight(std::atomic<int64_t>& n) : n_(n) { n_.fetch_add(1); }
  ~InFlight() { n_.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>& n_;
};

// Registers a submitted request with the server for its lifetime.
class ActiveStream {
 public:
  ActiveStream(std::mutex& mu, std::set<std::shared_ptr<engine::RequestStream>>& set,
               std::shared_ptr<engine::RequestStream> s)
      : mu_(mu), set_(set), s_(std::move(s)) {
    std::lock_guard<std::mutex> lock(mu_);
    set_.insert(s_);
  }
  ~ActiveStream() {
    std::lock_guard<std::mutex> lock(mu_);
    set_.erase(s_);
  }
  ActiveStream(const ActiveStream&) = delete;
  ActiveStream& operator=(const ActiveStream&) = delete;

 private:
  std::mutex& mu_;
  std::set<std::shared_ptr<engine::RequestStream>>& set_;
  std::shared_ptr<engine::RequestStream> s_;
};

// Engine log probabilities -> text the client can read; text_offset counts bytes of output.
void append_logprobs(const tokenizer::Tokenizer& tok, const engine::StreamEvent& ev,
                     int64_t& text_offset, std::vector<LogprobEntry>& out) {
  auto piece = [&](int32_t id) {
    try {
      return tok.token_to_piece(id);
    } catch (const std::out_of_range&) {
      return std::string();
    }
  };
  for (const auto& t : ev.logprobs) {
    LogprobEntry e;
    e.token = piece(t.token);
    e.logprob = t.logprob;
    for (const auto& alt : t.top) e.top.emplace_back(piece(alt.token), alt.logprob);
    e.text_offset = text_offset;
    text_offset += int64_t(e.token.size());
    out.push_back(std::move(e));
  }
}

Usage usage_of(const engine::StreamEvent& ev) {
  return {ev.prompt_tokens, ev.completion_tokens, ev.cached_prompt_tokens,
          ev.speculative,   ev.spec_proposed,     ev.spec_accepted};
}

// A submitted request whose response the stream pump writes (stream_pump.h): it keeps the model,
// the engine stream and the drain's counters while it lasts, and ends the request if the
// response goes away before the engine finished it (client gone, write failed, server stopping).
struct EngineJob : PumpedStream {
  std::shared_ptr<ServedModel> model;
  std::shared_ptr<engine::RequestStream> stream;
  std::unique_ptr<InFlight> in_flight;
  std::unique_ptr<ActiveStream> active;
  bool finished = false;  // the engine's last event was read

  ~EngineJob() override {
    if (!finished) stream->cancel();
  }
  void listen(std::function<void()> wake) override { stream->set_listener(std::move(wake)); }
  void abandon() override { stream->cancel(); }
};

// One streaming response: the engine's events as server-sent events, as they come.
struct StreamJob : EngineJob {
  const tokenizer::Tokenizer* tok = nullptr;
  ResponseMeta meta;
  bool include_usage = false;
  bool first = true;
  bool taken = false;  // handed to the pump
  int64_t text_offset = 0;

  bool poll(std::string& out) override {
    engine::StreamEvent ev;
    while (!finished && stream->next(ev, std::chrono::milliseconds(0))) {
      std::vector<LogprobEntry> logprobs;
      if (meta.logprobs) append_logprobs(*tok, ev, text_offset, logprobs);
      if (!ev.finished) {
        if (ev.text.empty() && logprobs.empty()) continue;  // nothing to tell the client yet
        out += sse_event(stream_chunk(meta, ev.text, logprobs, first, {}));
        first = false;
        continue;
      }
      finished = true;
      if (ev.finish_reason == engine::FinishReason::Error) {
        // The stream has started (status 200 is sent), so the error travels as an event.
        if (!ev.text.empty()) out += sse_event(stream_chunk(meta, ev.text, logprobs, first, {}));
        out += "data: " + error_body(server_error("generation failed: " + ev.error)) + "\n\n";
      } else {
        out += sse_event(stream_chunk(meta, ev.text, logprobs, first, ev.finish_reason));
        if (include_usage) out += sse_event(usage_chunk(meta, usage_of(ev)));
      }
      out += kSseDone;
    }
    return finished;
  }
};

// A non-streaming answer: the engine's events are collected, and once the last has come the
// whole response (head and JSON body) is written by the stream pump, so a request waiting in a
// model's queue or being generated holds no worker.
struct WholeReply {
  int status = 200;
  std::string body;  // JSON
};
struct WholeJob : EngineJob {
  std::function<void(const engine::StreamEvent&)> on_event;     // every event, the last too
  std::function<WholeReply(const engine::StreamEvent&)> reply;  // from the last event
  std::function<void(int status)> count;                        // the request counters'
  bool keep_alive = true;
  int keep_alive_s = 5;

  bool poll(std::string& out) override {
    engine::StreamEvent ev;
    while (!finished && stream->next(ev, std::chrono::milliseconds(0))) {
      on_event(ev);
      if (!ev.finished) continue;
      finished = true;
      const WholeReply r = reply(ev);
      count(r.status);
      out +=
          "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) +
          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(r.body.size()) +
          "\r\n" +
          (keep_alive ? "Keep-Alive: timeout=" + std::to_string(keep_alive_s) + ", max=1000\r\n"
                      : std::string("Connection: close\r\n")) +
          "\r\n" + r.body;
    }
    return finished;
  }

  static const char* reason_phrase(int status) {
    switch (status) {
      case 200:
        return "OK";
      case 400:
        return "Bad Request";
      case 422:
        return "Unprocessable Entity";
      case 500:
        return "Internal Server Error";
      case 503:
        return "Service Unavailable";
      default:
        return "Status";
    }
  }
};

WholeReply whole_error(const ApiError& e) {
  return {e.status, error_body(e)};
}

// What a worker's answer handed to the pump, set while httplib runs a route on the worker. A
// stream: httplib writes the response head, then asks the content provider for the body, which
// takes the job and ends httplib's part. A whole answer: the route takes the job and httplib's
// own response is dropped (FrontStream::discard_writes).
struct Answering {
  FrontStream* strm = nullptr;
  std::shared_ptr<PumpedStream> taken;
  StreamPump::Framing framing = StreamPump::Framing::Chunked;
  bool keep_alive = true;  // the request allows another on its connection
  bool last = false;       // the connection's last request (the keep-alive count is reached)
};
thread_local Answering* answering = nullptr;

// Hands a whole answer to the pump; false (nothing taken) outside a worker's answer.
bool take_whole(std::shared_ptr<WholeJob> job) {
  if (!answering || answering->taken) return false;
  answering->taken = std::move(job);
  answering->framing = StreamPump::Framing::Whole;
  answering->strm->discard_writes();
  return true;
}

// Answers a submission the engine did not accept. An engine that drains while the server does
// not belongs to a model being removed (admin DELETE between the request's lookup and its
// submission): for the client that model is gone, a 404 as for any request after the removal.
void send_refusal(httplib::Response& res, const engine::SubmitResult& sub, bool server_draining,
                  const std::string& model_name) {
  if (sub.status == engine::SubmitStatus::Accepted) return;
  if (sub.status == engine::SubmitStatus::QueueFull) res.set_header("Retry-After", "1");
  send_error(res, submit_refusal(sub, server_draining, model_name));
}

// Streaming: the response becomes server-sent events, written by the stream pump once httplib
// has written the head.
void stream_reply(httplib::Response& res, std::shared_ptr<StreamJob> job) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies: do not buffer the stream
  // Exactly "text/event-stream": httplib never compresses that type, so the chunks the pump
  // frames are the body as sent.
  res.set_chunked_content_provider(
      "text/event-stream",
      [job](size_t, httplib::DataSink&) {
        if (answering && !answering->taken) {
          job->taken = true;
          answering->taken = job;
          answering->framing = StreamPump::Framing::Chunked;
        }
        return false;  // httplib writes nothing more: the pump has the connection
      },
      [job](bool) {
        if (!job->taken) job->stream->cancel();  // the head could not be written
      });
}

// httplib's accept loop, with each accepted socket handed to the connection front instead of a
// worker of its own; workers call answer() once the front holds a complete request.
class FrontedServer : public httplib::Server {
 public:
  std::function<void(int)> adopt;
  bool answer(httplib::Stream& strm, bool last, bool& connection_closed) {
    return process_request(strm, last, connection_closed, nullptr);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    adopt(sock);
    return true;
  }
};

// The connection front's gauge and counters in Prometheus text.
std::string connection_metrics(const FrontCounters& c) {
  std::string out =
      "# HELP shrike_http_connections_open Open HTTP connections (being read, answered or idle).\n"
      "# TYPE shrike_http_connections_open gauge\n"
      "shrike_http_connections_open " +
      std::to_string(c.open) +
      "\n# HELP shrike_http_connections_closed_total Connections the server closed early: "
      "request not complete in time (timeout), over --max-connections (evicted, refused), "
      "framing over a limit or malformed (rejected).\n"
      "# TYPE shrike_http_connections_closed_total counter\n";
  for (const auto& [reason, n] : {std::pair<const char*, int64_t>{"timeout", c.timed_out},
                                  {"evicted", c.evicted},
                                  {"refused", c.refused},
                                  {"rejected", c.rejected}})
    out += std::string("shrike_http_connections_closed_total{reason=\"") + reason + "\"} " +
           std::to_string(n) + "\n";
  return out;
}

// Runs httplib's per-connection task on the accept thread: it only hands the socket over.
class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// The OpenAI error of an answer the connection front gives by itself.
ApiError front_error(int status, const std::string& message) {
  switch (status) {
    case 408:
      return ApiError{408, message, "invalid_request_error", "", "request_timeout"};
    case 413:
      return ApiError{413, message, "invalid_request_error", "", "request_too_large"};
    case 414:
    case 431:
      return ApiError{status, message, "invalid_request_error", "", "request_head_too_large"};
    case 503:
      return ApiError{503, message, "server_error", "", "too_many_connections"};
    default:
      return ApiError{status, message, "invalid_request_error", "", "malformed_request"};
  }
}

FrontLimits front_limits(const ServerOptions& o) {
  FrontLimits f;
  f.frame.max_head_bytes = o.max_header_bytes;
  f.frame.max_headers = o.max_headers;
  f.frame.max_body_bytes = o.max_body_bytes;
  f.header_timeout_s = o.header_timeout_s;
  f.body_timeout_s = o.body_timeout_s;
  f.keep_alive_timeout_s = o.keep_alive_timeout_s;
  f.max_connections = o.max_connections;
  f.max_keep_alive_requests = 1000;
  f.send_buffer_bytes = o.send_buffer_bytes;
  f.workers = o.http_threads > 0 ? o.http_threads : 64;
  f.probe_paths = {"/health", "/live", "/metrics"};  // answered whatever holds the workers
  return f;
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(ServerOptions o)
      : opt(std::move(o)),
        front(
            front_limits(opt),
            [this](int fd, std::string& buf, size_t request_bytes, bool last) {
              return answer(fd, buf, request_bytes, last);
            },
            [this](int status, const std::string& message) {
              {
                std::lock_guard<std::mutex> lock(counts_mu);
                ++counts[{"connection", status}];
              }
              return error_body(front_error(status, message));
            }),
        pump(
            PumpLimits{write_timeout(),
                       std::chrono::duration_cast<std::chrono::milliseconds>(kKeepAliveEvery)},
            [this](int fd, std::string pending) { front.resume(fd, std::move(pending)); },
            [this](int fd) { front.release(fd); }),
        rng(std::random_device{}()) {}

  // One complete request from the front: parsed and answered by httplib on this worker, within
  // the bytes the front's framer delimited (the one authority on where a request ends).
  ConnectionFront::Outcome answer(int fd, std::string& buf, size_t request_bytes, bool last) {
    FrontStream strm(fd, buf, request_bytes, write_timeout());
    Answering here;
    here.strm = &strm;
    here.last = last;
    answering = &here;
    bool closed = false;
    const bool ok = svr.answer(strm, last, closed);
    answering = nullptr;
    buf.erase(0, request_bytes);
    if (here.taken) {
      const bool keep_alive = here.keep_alive && !last;
      pump.add(fd, std::move(here.taken), here.framing, keep_alive, std::move(buf));
      return ConnectionFront::Outcome::Taken;
    }
    return ok && !closed && !last ? ConnectionFront::Outcome::Keep
                                  : ConnectionFront::Outcome::Close;
  }

  // After stop(): the cancelled requests' last events (a 503, a stream's end) go out if their
  // clients read within a second; then whatever is left is cut and every thread joined.
  void wind_down() {
    for (int i = 0; i < 100 && pump.streams() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pump.stop();
    front.stop();
  }

  std::chrono::milliseconds write_timeout() const {
    return std::chrono::milliseconds(int64_t(std::max(0.001, opt.write_timeout_s) * 1000));
  }

  ServerOptions opt;
  FrontedServer svr;
  ConnectionFront front;
  StreamPump pump;  // after front: stopped and destroyed before it
  ModelRegistry models;
  std::atomic<bool> ready{false};
  std::mutex loader_mu;  // one admin load or removal at a time
  ModelLoader loader;
  std::shared_ptr<const kv::KvMemoryLedger> kv_ledger;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> serving{false}, stop_requested{false};
  int listen_fd = -1;  // the listening socket, seen through httplib's socket-options hook
  std::mutex stop_mu;
  bool stopped = false;
  const int64_t created = unix_now();

  mutable std::mutex counts_mu;
  std::map<std::pair<std::string, int>, int64_t> counts;

  // Requests submitted and not yet answered, so that stop() can end them: a drain that times out
  // must not wait for them (their workers would keep serve() from returning).
  std::mutex active_mu;
  std::set<std::shared_ptr<engine::RequestStream>> active;

  std::mutex rng_mu;
  std::mt19937_64 rng;

  // The model a request names, or (no name) the only one; nullptr after answering 503 (not
  // ready), 404 (no such model) or 400 (no name while several are served).
  std::shared_ptr<ServedModel> resolve(const std::string& name, httplib::Response& res) {
    if (!ready.load()) {
      send_error(res, unavailable("The model is still loading."));
      return nullptr;
    }
    if (!name.empty()) {
      auto m = models.find(name);
      if (!m) send_error(res, model_not_found(name));
      return m;
    }
    auto all = models.all();
    if (all.size() == 1) return all.front();
    if (all.empty()) {
      send_error(res, unavailable("The server holds no model."));
      return nullptr;
    }
    std::string names;
    for (const auto& m : all) names += (names.empty() ? "" : ", ") + m->name();
    send_error(res, bad_request("'model' is required: this server holds " + names + ".", "model",
                                "missing_required_parameter"));
    return nullptr;
  }

  // 404 (as for an unknown route) without an admin key, 401 without the right one.
  bool check_admin(const httplib::Request& req, httplib::Response& res) const {
    if (opt.admin_key.empty()) {
      send_error(res, not_found("Unknown route: " + req.method + " " + req.path));
      return false;
    }
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.rfind(prefix, 0) != 0 ||
        !api_key_matches(std::string_view(h).substr(prefix.size()), opt.admin_key)) {
      send_error(res, unauthorized("This route needs the admin key as 'Bearer KEY'."));
      return false;
    }
    return true;
  }
  void admin_add(const httplib::Request& req, httplib::Response& res,
                 const httplib::ContentReader& reader);
  void admin_remove(const httplib::Request& req, httplib::Response& res);
  std::string metrics_text();

  uint64_t random64() {
    std::lock_guard<std::mutex> lock(rng_mu);
    return rng();
  }

  std::string new_id(Endpoint ep) {
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)random64(),
                  (unsigned long long)random64());
    return std::string(ep == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-") + hex;
  }

  // 401 when a key is configured and the request does not carry it as "Bearer KEY".
  std::optional<ApiError> check_auth(const httplib::Request& req) const {
    if (opt.api_key.empty()) return std::nullopt;
    if (!req.has_header("Authorization"))
      return unauthorized(
          "You didn't provide an API key. Send it in the Authorization header as 'Bearer KEY'.");
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.rfind(prefix, 0) != 0 ||
        !api_key_matches(std::string_view(h).substr(prefix.size()), opt.api_key))
      return unauthorized("Incorrect API key provided.");
    return std::nullopt;
  }

  void install_routes();
  // A completion: read the body, translate it (to_generation_request), submit, then reply with
  // a stream or the whole answer.
  void generate(const httplib::Request& req, httplib::Response& res,
                const httplib::ContentReader& reader, Endpoint ep);
  // The body within opt.max_body_bytes, or nullopt after answering 413 or 400.
  std::optional<std::string> read_body(httplib::Response& res,
                                       const httplib::ContentReader& reader);
  // Not streaming: the pump writes the whole answer once the engine has finished it.
  void hand_over(const httplib::Request& req, httplib::Response& res, std::shared_ptr<WholeJob> job,
                 std::unique_ptr<InFlight> in_flight_guard,
                 std::unique_ptr<ActiveStream> active_guard);
  // Whether the connection may carry another request after this one (HTTP/1.1, no close).
  static void note_keep_alive(const httplib::Request& req) {
    if (answering)
      answering->keep_alive =
          req.version == "HTTP/1.1" && req.get_header_value("Connection") != "close";
  }
  void count_request(const std::string& label, int status) {
    std::lock_guard<std::mutex> lock(counts_mu);
    ++counts[{label, status}];
  }
  void list_models(const httplib::Request& req, httplib::Response& res);
  // A route of a layer above (model_hooks.h, HttpServer::add_route).
  void model_route(const httplib::Request& req, httplib::Response& res,
                   const httplib::ContentReader& reader, const ModelRoute& route);
  std::vector<std::string> added_routes;  // their paths, for the request counters' labels
};

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& m = *impl_;
  m.svr.new_task_queue = [] { return new InlineQueue(); };
  m.svr.adopt = [&m](int fd) { m.front.adopt(fd); };
  m.svr.set_payload_max_length(m.opt.max_body_bytes);
  // Only for the Keep-Alive header httplib writes: the front enforces both.
  m.svr.set_keep_alive_max_count(1000);
  m.svr.set_keep_alive_timeout(time_t(std::ceil(m.opt.keep_alive_timeout_s)));
  // Replaces httplib's default options, which include SO_REUSEPORT: with it a second server on a
  // busy port would start and silently share the connections instead of failing.
  m.svr.set_socket_options([&m](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    m.listen_fd = sock;
  });
  m.install_routes();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::Impl::install_routes() {
  const auto post_only = [](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", "POST");
    send_error(res,
               method_not_allowed(req.method + " is not allowed on " + req.path + "; use POST"));
  };
  const auto get_only = [](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", "GET");
    send_error(res,
               method_not_allowed(req.method + " is not allowed on " + req.path + "; use GET"));
  };

  svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader) {
    generate(req, res, reader, Endpoint::Completions);
  });
  svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res,
                                          const httplib::ContentReader& reader) {
    generate(req, res, reader, Endpoint::ChatCompletions);
  });
  svr.Get("/v1/completions", post_only);
  svr.Get("/v1/chat/completions", post_only);

  // Readiness: whether to send traffic here (a load balancer's or Kubernetes' readinessProbe).
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining.load())
      send_json(res, 503, {{"status", "draining"}});
    else if (!ready.load())
      send_json(res, 503, {{"status", "loading"}});
    else
      send_json(res, 200, {{"status", "ok"}, {"models", int64_t(models.size())}});
  });
  // Liveness: the process answers HTTP (a livenessProbe restarts it when this fails); 200 while
  // loading and draining too, which are not reasons to restart.
  svr.Get("/live", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "alive"}});
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready.load()) return send_error(res, unavailable("the model is still loading"));
    res.status = 200;
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
  svr.Post("/admin/models",
           [this](const httplib::Request& req, httplib::Response& res,
                  const httplib::ContentReader& reader) { admin_add(req, res, reader); });
  svr.Delete("/admin/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    admin_remove(req, res);
  });
  svr.Get("/v1/models",
          [this](const httplib::Request& req, httplib::Response& res) { list_models(req, res); });
  svr.Get("/v1/models/(.+)",
          [this](const httplib::Request& req, httplib::Response& res) { list_models(req, res); });
  for (const char* path : {"/health", "/live", "/metrics", "/v1/models"}) svr.Post(path, get_only);

  // Fills in an OpenAI error body wherever httplib answers by itself: unknown routes (404), bodies
  // over the limit (413), unparsable request lines (400).
  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e;
        switch (res.status) {
          case 404:
            e = not_found("Unknown route: " + req.method + " " + req.path);
            break;
          case 413:
            e = payload_too_large(opt.max_body_bytes);
            break;
          case 400:
            e = bad_request("Malformed HTTP request");
            break;
          default:
            e = ApiError{res.status, std::string("HTTP ") + std::to_string(res.status),
                         res.status >= 500 ? "server_error" : "invalid_request_error", "", ""};
        }
        if (res.status == 413) res.set_header("Connection", "close");
        res.set_content(error_body(e), kJsonType);
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, server_error("internal error: " + what));
      });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    // A whole answer handed to the pump is counted when it is written, with its real status.
    if (answering && answering->taken && answering->framing == StreamPump::Framing::Whole) return;
    count_request(route_label(req.path, added_routes), res.status);
  });
}

void HttpServer::Impl::list_models(const httplib::Request& req, httplib::Response& res) {
  if (auto e = check_auth(req)) return send_error(res, *e);
  const auto card = [&](const ServedModel& m) {
    nlohmann::json c = {
        {"id", m.name()}, {"object", "model"}, {"created", created}, {"owned_by", "shrike"}};
    c["max_model_len"] = m.engine().context_length();
    if (!m.instance().serving_options.empty())
      c["shrike"] = {{"serving_options", m.instance().serving_options}};
    return c;
  };
  if (req.matches.size() > 1) {
    const std::string id = req.matches[1];
    const auto m = models.find(id);
    if (!m) return send_error(res, model_not_found(id));
    return send_json(res, 200, card(*m));
  }
  nlohmann::json data = nlohmann::json::array();
  for (const auto& m : models.all()) data.push_back(card(*m));
  send_json(res, 200, {{"object", "list"}, {"data", data}});
}

std::string HttpServer::Impl::metrics_text() {
  std::vector<engine::HttpRequestCount> http;
  {
    std::lock_guard<std::mutex> lock(counts_mu);
    for (const auto& [key, n] : counts) http.push_back({key.first, key.second, n});
  }
  const auto all = models.all();  // kept alive while their metrics are read
  std::vector<engine::ModelMetricsView> views;
  for (const auto& m : all)
    views.push_back({m->name(), &m->engine().metrics(), m->engine().gauges()});
  engine::PrometheusOptions po;
  po.vllm_compat = opt.vllm_metrics;
  if (kv_ledger) {
    po.shared_kv_budget_bytes = int64_t(kv_ledger->total_bytes());
    po.shared_kv_claimed_bytes = int64_t(kv_ledger->claimed_bytes());
  }
  return engine::render_prometheus(views, http, po) + connection_metrics(front.counters());
}

void HttpServer::Impl::admin_add(const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
  const std::optional<std::string> body = read_body(res, reader);
  if (!body) return;
  if (!check_admin(req, res)) return;
  const auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return send_error(res, bad_request("The body must be a JSON object such as {\"name\": "
                                       "\"support\", \"path\": \"/models/support.gguf\"}.",
                                       "", "invalid_json"));
  for (const char* key : {"name", "path"})
    if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
      return send_error(
          res, bad_request(std::string("'") + key + "' is required (a non-empty string).", key,
                           "missing_required_parameter"));
  const std::string name = j["name"], path = j["path"];
  if (const auto problem = model_name_problem(name))
    return send_error(res, bad_request("'name': " + *problem + ".", "name", "invalid_value"));
  if (draining.load())
    return send_error(res, unavailable("The server is shutting down and accepts no new models."));
  if (!loader) return send_error(res, server_error("This server cannot load models."));
  std::lock_guard<std::mutex> lock(loader_mu);
  if (models.find(name))
    return send_error(res, ApiError{409, "A model named '" + name + "' is already served.",
                                    "invalid_request_error", "name", "model_exists"});
  std::unique_ptr<ModelInstance> inst;
  try {
    inst = loader(name, path, *body);
  } catch (const std::exception& e) {
    return send_error(res, bad_request(std::string("Cannot load the model: ") + e.what(), "path",
                                       "model_load_failed"));
  }
  auto served = std::make_shared<ServedModel>(std::move(inst));
  models.add(served);
  std::fprintf(stderr, "shrike serve: model '%s' added (%s)\n", name.c_str(), path.c_str());
  send_json(res, 201, {{"id", name}, {"object", "model"}, {"status", "added"}});
}

void HttpServer::Impl::admin_remove(const httplib::Request& req, httplib::Response& res) {
  if (!check_admin(req, res)) return;
  const std::string name = req.matches[1];
  std::lock_guard<std::mutex> lock(loader_mu);
  std::shared_ptr<ServedModel> m = models.remove(name);
  if (!m) return send_error(res, model_not_found(name));
  // New requests naming it get 404 from now on; those running finish.
  m->engine().drain();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(opt.remove_drain_s));
  while (!m->engine().idle() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool drained = m->engine().idle();
  std::fprintf(stderr, "shrike serve: model '%s' removed%s\n", name.c_str(),
               drained ? "" : " (requests still running; its memory goes when they end)");
  // The engine and its memory go with the last reference: here, or in the last request's worker.
  m.reset();
  send_json(res, 200,
            {{"id", name}, {"object", "model"}, {"status", "removed"}, {"drained", drained}});
}

std::optional<std::string> HttpServer::Impl::read_body(httplib::Response& res,
                                                       const httplib::ContentReader& reader) {
  // The limit is enforced while reading: httplib checks Content-Length itself, but a chunked
  // body has none. An oversized chunked body is still read to its end (up to a cap) and dropped,
  // so the 413 goes out on a connection that is still in step with the client.
  std::string body;
  bool too_big = false;
  size_t received = 0;
  const size_t drain_cap = std::max(opt.max_body_bytes * 4, size_t(64) << 20);
  const bool read_ok = reader([&](const char* data, size_t n) {
    received += n;
    if (received > opt.max_body_bytes) {
      too_big = true;
      body.clear();
      return received <= drain_cap;
    }
    body.append(data, n);
    return true;
  });
  if (too_big || res.status == 413 || !read_ok) {
    // Part of the body may still be unread: then this connection cannot carry another request.
    if (!read_ok) res.set_header("Connection", "close");
    send_error(res, too_big || res.status == 413 ? payload_too_large(opt.max_body_bytes)
                                                 : bad_request("Could not read the request body."));
    return std::nullopt;
  }
  return body;
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader, Endpoint ep) {
  auto in_flight_guard = std::make_unique<InFlight>(in_flight);
  const std::optional<std::string> body = read_body(res, reader);
  if (!body) return;
  if (auto e = check_auth(req)) return send_error(res, *e);
  if (draining.load())
    return send_error(res, unavailable("The server is shutting down and accepts no new requests."));
  if (!ready.load()) return send_error(res, unavailable("The model is still loading."));

  auto parsed = parse_request(*body, ep);
  if (const auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  ParsedRequest& p = std::get<ParsedRequest>(parsed);
  std::shared_ptr<ServedModel> model = resolve(p.model, res);
  if (!model) return;
  engine::Engine* eng = &model->engine();
  // A model with an attachment (a task model) answers in its default schema.
  const bool default_constraint = !p.constraint && model->default_spec();
  if (default_constraint) {
    p.constraint = model->default_spec();
    p.constraint_param = model->attachment()->default_spec_name();
  }
  const tokenizer::Tokenizer& tok = eng->tokenizer();
  auto request = to_generation_request(
      p, RequestContext{
             tok, model->instance().chat_format, eng->model().config().add_bos,
             eng->context_length(), model->name(), opt.request_timeout_s, random64(), Clock::now(),
             [&](const constrain::ConstraintSpec& spec) {
               // A prompt the attachment recognises may narrow its schema (a
               // task's: slot values from the prompt's utterance).
               if (default_constraint && ep == Endpoint::Completions && !p.prompt_is_tokens)
                 if (auto c = model->attachment()->constraint_for_prompt(*model, p.prompt_text))
                   return c;
               return model->compile(spec);
             }});
  if (const auto* e = std::get_if<ApiError>(&request)) return send_error(res, *e);

  engine::SubmitResult sub = eng->submit(std::move(std::get<engine::GenerationRequest>(request)));
  if (sub.status != engine::SubmitStatus::Accepted)
    return send_refusal(res, sub, draining.load(), model->name());

  auto active_guard = std::make_unique<ActiveStream>(active_mu, active, sub.stream);
  note_keep_alive(req);
  ResponseMeta meta;
  meta.endpoint = ep;
  meta.id = new_id(ep);
  meta.created = unix_now();
  meta.model = model->name();
  meta.logprobs = p.sampling.logprobs;

  if (p.stream) {
    auto job = std::make_shared<StreamJob>();
    job->model = model;
    job->stream = sub.stream;
    job->tok = &tok;
    job->meta = std::move(meta);
    job->include_usage = p.include_usage;
    job->in_flight = std::move(in_flight_guard);
    job->active = std::move(active_guard);
    return stream_reply(res, std::move(job));
  }
  // Not streaming: the whole answer once the engine has finished.
  struct Collected {
    std::string text;
    std::vector<LogprobEntry> logprobs;
    int64_t text_offset = 0;
  };
  auto got = std::make_shared<Collected>();
  auto job = std::make_shared<WholeJob>();
  job->model = model;
  job->stream = sub.stream;
  job->on_event = [got, tok = &tok, logprobs = meta.logprobs](const engine::StreamEvent& ev) {
    got->text += ev.text;
    if (logprobs) append_logprobs(*tok, ev, got->text_offset, got->logprobs);
  };
  job->reply = [got, meta](const engine::StreamEvent& ev) -> WholeReply {
    if (ev.finish_reason == engine::FinishReason::Error)
      return whole_error(server_error("Generation failed: " + ev.error));
    if (ev.finish_reason == engine::FinishReason::Cancelled)
      return whole_error(unavailable("The request was cancelled: the server is shutting down."));
    return {200, dump_json(completion_response(meta, got->text, ev.finish_reason, got->logprobs,
                                               usage_of(ev)))};
  };
  hand_over(req, res, std::move(job), std::move(in_flight_guard), std::move(active_guard));
}

void HttpServer::Impl::hand_over(const httplib::Request& req, httplib::Response& res,
                                 std::shared_ptr<WholeJob> job,
                                 std::unique_ptr<InFlight> in_flight_guard,
                                 std::unique_ptr<ActiveStream> active_guard) {
  job->in_flight = std::move(in_flight_guard);
  job->active = std::move(active_guard);
  job->keep_alive_s = int(std::ceil(opt.keep_alive_timeout_s));
  const std::string label = route_label(req.path, added_routes);
  job->count = [this, label](int status) { count_request(label, status); };
  if (answering) job->keep_alive = answering->keep_alive && !answering->last;
  if (!take_whole(job)) {
    job->stream->cancel();
    send_error(res, server_error("internal error: no connection to answer on"));
  }
}

int HttpServer::bind() {
  Impl& m = *impl_;
  int port = m.opt.port;
  if (port == 0) {
    port = m.svr.bind_to_any_port(m.opt.host);
    if (port <= 0) throw std::runtime_error("cannot listen on " + m.opt.host + " (any port)");
  } else if (!m.svr.bind_to_port(m.opt.host, port)) {
    throw std::runtime_error("cannot listen on " + m.opt.host + ":" + std::to_string(port) +
                             " (address in use, or not an address of this machine)");
  }
  // httplib listens with a backlog of 5: a burst of new connections would see SYNs dropped and
  // retried a second later. Listening again only raises the backlog.
  if (m.listen_fd >= 0) ::listen(m.listen_fd, SOMAXCONN);
  return port;
}

void HttpServer::serve() {
  Impl& m = *impl_;
  m.front.start();
  m.pump.start();
  m.serving.store(true);
  if (!m.stop_requested.load()) m.svr.listen_after_bind();
  m.serving.store(false);
  m.wind_down();
}

void HttpServer::add_model(std::unique_ptr<ModelInstance> model) {
  impl_->models.add(std::make_shared<ServedModel>(std::move(model)));
}

void HttpServer::set_ready() {
  impl_->ready.store(true);
}

void HttpServer::set_model_loader(ModelLoader loader) {
  impl_->loader = std::move(loader);
}

void HttpServer::set_kv_ledger(std::shared_ptr<const kv::KvMemoryLedger> ledger) {
  impl_->kv_ledger = std::move(ledger);
}

void HttpServer::add_route(ModelRoute route) {
  Impl& m = *impl_;
  m.added_routes.push_back(route.path);
  auto r = std::make_shared<const ModelRoute>(std::move(route));
  m.svr.Post(r->path, [&m, r](const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader& reader) {
    m.model_route(req, res, reader, *r);
  });
  m.svr.Get(r->path, [](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", "POST");
    send_error(res,
               method_not_allowed(req.method + " is not allowed on " + req.path + "; use POST"));
  });
}

void HttpServer::Impl::model_route(const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader, const ModelRoute& route) {
  auto in_flight_guard = std::make_unique<InFlight>(in_flight);
  const std::optional<std::string> body = read_body(res, reader);
  if (!body) return;
  if (auto e = check_auth(req)) return send_error(res, *e);
  if (draining.load())
    return send_error(res, unavailable("The server is shutting down and accepts no new requests."));
  if (!ready.load()) return send_error(res, unavailable("The model is still loading."));
  // The body may name the model like the OpenAI routes do.
  std::string name;
  if (const auto j = nlohmann::json::parse(*body, nullptr, false);
      j.is_object() && j.contains("model")) {
    if (!j["model"].is_string())
      return send_error(res, bad_request("Invalid type for 'model': expected a string.", "model",
                                         "invalid_type"));
    name = j["model"].get<std::string>();
  }
  std::shared_ptr<ServedModel> model = resolve(name, res);
  if (!model) return;
  auto request = route.make_request(*body, *model);
  if (const auto* e = std::get_if<ApiError>(&request)) return send_error(res, *e);
  engine::Engine* eng = &model->engine();
  const auto t0 = Clock::now();
  engine::SubmitResult sub = eng->submit(std::move(std::get<engine::GenerationRequest>(request)));
  if (sub.status != engine::SubmitStatus::Accepted)
    return send_refusal(res, sub, draining.load(), model->name());
  auto active_guard = std::make_unique<ActiveStream>(active_mu, active, sub.stream);
  note_keep_alive(req);
  struct Collected {
    std::string answer;
    double first_ms = -1;
  };
  const auto ms = [t0] {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  auto got = std::make_shared<Collected>();
  auto job = std::make_shared<WholeJob>();
  job->model = model;
  job->stream = sub.stream;
  job->on_event = [got, ms](const engine::StreamEvent& ev) {
    if (got->first_ms < 0 && !ev.tokens.empty()) got->first_ms = ms();
    got->answer += ev.text;
  };
  job->reply = [got, ms, &route, model](const engine::StreamEvent& ev) -> WholeReply {
    if (ev.finish_reason == engine::FinishReason::Error)
      return whole_error(server_error("Generation failed: " + ev.error));
    if (ev.finish_reason == engine::FinishReason::Cancelled)
      return whole_error(unavailable("The request was cancelled: the server is shutting down."));
    const double total = ms();
    auto reply =
        route.reply(*model, got->answer, ev, total, got->first_ms < 0 ? total : got->first_ms);
    if (const auto* e = std::get_if<ApiError>(&reply)) return whole_error(*e);
    return {200, dump_json(std::get<nlohmann::json>(reply))};
  };
  hand_over(req, res, std::move(job), std::move(in_flight_guard), std::move(active_guard));
}

void HttpServer::begin_drain() {
  impl_->draining.store(true);
  for (const auto& m : impl_->models.all()) m->engine().drain();
}

bool HttpServer::drained() const {
  if (impl_->in_flight.load() != 0) return false;
  for (const auto& m : impl_->models.all())
    if (!m->engine().idle()) return false;
  return true;
}

void HttpServer::stop() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.stop_mu);
  if (m.stopped) return;
  m.stop_requested.store(true);
  {
    std::lock_guard<std::mutex> active_lock(m.active_mu);
    for (const auto& s : m.active) s->cancel();
  }
  // serve() may be about to listen: httplib's stop() only works once it runs.
  for (int i = 0; i < 2000 && m.serving.load() && !m.svr.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  m.svr.stop();
  m.wind_down();
  m.stopped = true;
}

std::vector<engine::HttpRequestCount> HttpServer::request_counts() const {
  std::lock_guard<std::mutex> lock(impl_->counts_mu);
  std::vector<engine::HttpRequestCount> out;
  for (const auto& [key, n] : impl_->counts) out.push_back({key.first, key.second, n});
  return out;
}

}  // namespace shrike::server

#if defined(SHRIKE_TSAN)
// ThreadSanitizer builds: Debian's libcpp-httplib is not instrumented, so TSan cannot see its
// synchronization and reports the thread-safe first initialisation of a function-local static
// string in its chunked writer (two streams finishing at once) as a race. Reports whose stacks
// pass through the library are not trustworthy either way; shrike's own code stays checked.
extern "C" const char* __tsan_default_suppressions() {
  return "race:libcpp-httplib.so\n";
}
#endif
