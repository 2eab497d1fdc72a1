// The HTTP front of `shrike serve`: OpenAI-compatible routes over cpp-httplib, SSE streaming,
// API-key checks, body limits, request counting for /metrics, and the drain that SIGTERM starts.
// httplib accepts connections and parses requests, but connections are held by the connection
// front (connection_front.h) until a request is complete; then a worker thread parses it with
// httplib, tokenizes it and submits it to the engine of the model it names (model_registry.h).
// From there the stream pump (stream_pump.h) has the connection: it writes a stream's events as
// they come, or a whole answer once the engine has finished it, from one event-loop thread, so no
// request holds a thread while it waits in a model's queue or is generated. With an admin key,
// /admin/models adds and removes models while serving.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/metrics.h"
#include "kv/shared_budget.h"
#include "server/model_registry.h"

namespace shrike::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (bind() says which)
  std::string api_key;  // empty: no authentication
  // Bearer key of the admin routes (POST /admin/models, DELETE /admin/models/NAME); empty: those
  // routes do not exist (404).
  std::string admin_key;
  // /metrics also carries vLLM's names of the three gauges the Gateway API Inference
  // Extension reads (engine::PrometheusOptions::vllm_compat).
  bool vllm_metrics = false;
  // Seconds DELETE /admin/models waits for the model's running requests before answering (they
  // finish either way; the model's memory goes when the last one does).
  double remove_drain_s = 30;
  size_t max_body_bytes = size_t(8) << 20;
  double request_timeout_s = 0;  // deadline of requests that set no "timeout"; 0: none
  // Workers parsing and submitting complete requests; clients still sending, idle keep-alive
  // connections, streams and answers being generated hold none (connection_front.h,
  // stream_pump.h). 0: 64.
  int http_threads = 0;
  // Slow and hostile clients (connection_front.h, request_framer.h): whole-request deadlines,
  // head limits, open connections, and how long a write may wait for a client to read.
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  double keep_alive_timeout_s = 5;
  double write_timeout_s = 10;
  // Kernel send buffer per connection: bounds what a client that stops reading can leave
  // queued before writes wait write_timeout_s and fail (0: the kernel's autotuning, ~4 MiB).
  size_t send_buffer_bytes = size_t(256) << 10;
  size_t max_connections = 4096;
  size_t max_header_bytes = size_t(16) << 10;
  size_t max_headers = 100;
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
  // set_ready(), /health answers 503 "loading" and generation routes 503 (/live answers 200
  // from the start: the process is alive).
  void serve();
  // A model to serve under its name (std::invalid_argument when the name is taken). Its
  // serving_options (effective settings, e.g. kv_type, batching) are listed under the "shrike"
  // extension field of /v1/models, so a client can see how the model is served without parsing
  // the log.
  void add_model(std::unique_ptr<ModelInstance> model);
  // The models given at start are loaded: /health answers 200 from now on.
  void set_ready();
  // Loads a model for POST /admin/models {"name", "path"} (the rest of the body is the loader's
  // to read); throws with a message for the client when it cannot.
  using ModelLoader = std::function<std::unique_ptr<ModelInstance>(
      const std::string& name, const std::string& path, const std::string& body)>;
  void set_model_loader(ModelLoader loader);
  // A POST route of a layer above (model_hooks.h: the task layer's /v1/intent). Call before
  // serve().
  void add_route(ModelRoute route);
  // The KV memory budget the models share (serve --kv-memory), for /metrics.
  void set_kv_ledger(std::shared_ptr<const kv::KvMemoryLedger> ledger);

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
