// The HTTP front of `shrike serve`: OpenAI-compatible routes over cpp-httplib, SSE streaming,
// API-key checks, body limits, request counting for /metrics, and the drain that SIGTERM starts.
// Each request runs on an httplib worker thread, which tokenizes it, submits it to the engine
// and relays the engine's events to the client (a streaming request holds its worker until done).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/task_definition.h"
#include "engine/metrics.h"
#include "server/chat_format.h"

namespace shrike::engine {
class Engine;
}

namespace shrike::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port (bind() says which)
  std::string api_key;     // empty: no authentication
  std::string model_name;  // the id /v1/models lists and requests may name
  size_t max_body_bytes = size_t(8) << 20;
  double request_timeout_s = 0;  // deadline of requests that set no "timeout"; 0: none
  int http_threads = 64;         // httplib workers: one per open connection (streams hold one)
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket and returns its port. Throws std::runtime_error when it cannot.
  int bind();
  // Accepts connections until stop(); call after bind(), typically on its own thread. Until
  // attach(), /health answers 503 "loading" and generation routes 503.
  void serve();
  // The engine that serves the generation routes (it must outlive the server) and the chat
  // format of its model. From now on /health answers 200. serving_options (effective settings,
  // e.g. kv_type, batching) are listed under the "shrike" extension field of /v1/models, so a
  // client can see how the model is served without parsing the log.
  void attach(engine::Engine& engine, ChatFormat chat_format,
              std::map<std::string, std::string> serving_options = {});
  // The model's task (data/task_definition.h), before attach() (which compiles its schema): POST
  // /v1/intent answers with it (404 without one), and with schema_by_default requests that give no
  // constraint of their own are constrained to the task's schema (data::task_schema).
  void set_task(std::optional<data::TaskDefinition> task, bool schema_by_default);

  // Refuse new work from now on (503, /health 503 "draining"); running requests continue.
  void begin_drain();
  // No request is being generated or written (and the engine, if attached, is idle).
  bool drained() const;
  // Stops accepting and makes serve() return; open streams end. Thread-safe, idempotent.
  void stop();

  std::vector<engine::HttpRequestCount> request_counts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shrike::server
