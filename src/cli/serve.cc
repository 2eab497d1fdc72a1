// `shrike serve`: the model behind an OpenAI-compatible HTTP API. The port is bound first (so
// /health can say "loading"), then the model loads and the engine starts; SIGTERM or SIGINT
// drains: new requests get 503, running ones finish (up to --drain-timeout), then it exits 0.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/kv_options.h"
#include "cli/model_files.h"
#include "cli/spec_options.h"
#include "core/dtype.h"
#include "core/file_buffer.h"
#include "data/task_definition.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "server/http_server.h"
#include "tokenizer/hf_tokenizer.h"

namespace shrike::cli {
namespace {

struct ServeArgs {
  std::string model, tokenizer, chat_template;
  server::ServerOptions server;
  engine::EngineConfig engine;
  std::string batching = "continuous";
  int64_t ctx = 0;
  int64_t kv_cache_mb = 0;
  KvCacheArgs kv_args{"f16", {}};
  bool no_prefix_cache = false;
  bool no_task_schema = false;
  double drain_timeout_s = 30;
  double max_body_mb = 8;
  SpecArgs spec;
};

// Signals arrive as bytes on a pipe (the handler does nothing else, as async-signal safety
// requires); a watcher thread reads them. Byte 0 wakes the watcher without a signal.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const int saved = errno;
  const char c = char(sig);
  [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

class SignalPipe {
 public:
  SignalPipe() {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
    // A client that disconnects must not kill the server with SIGPIPE.
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalPipe() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    close(g_signal_pipe[0]);
    close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  void wake() { on_stop_signal(0); }
  // Waits up to timeout_ms (-1: forever) for a byte: the signal number, 0 for wake(), -1 for
  // none.
  int wait(int timeout_ms) {
    pollfd p{g_signal_pipe[0], POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return -1;
    char c = 0;
    return read(g_signal_pipe[0], &c, 1) == 1 ? int(c) : -1;
  }

 private:
  struct sigaction old_term_ {
  }, old_int_{}, old_pipe_{};
};

// On the first signal: drain, then stop the HTTP server (which makes serve() return). A second
// signal during the drain stops at once.
void watch_signals(SignalPipe& signals, server::HttpServer& http, double drain_timeout_s,
                   std::atomic<bool>& signalled) {
  const int sig = signals.wait(-1);
  if (sig <= 0) return;  // woken: the server stopped for another reason
  signalled.store(true);
  std::fprintf(stderr, "shrike serve: %s received, draining (up to %.0f s)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", drain_timeout_s);
  http.begin_drain();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(drain_timeout_s));
  bool drained = false;
  while (!(drained = http.drained()) && std::chrono::steady_clock::now() < deadline) {
    const int again = signals.wait(20);
    if (again == 0) break;
    if (again > 0) {
      std::fprintf(stderr, "shrike serve: second signal, stopping now\n");
      break;
    }
  }
  if (!drained) std::fprintf(stderr, "shrike serve: stopping with requests still running\n");
  http.stop();
}

std::string model_id(const ServeArgs& a) {
  if (!a.server.model_name.empty()) return a.server.model_name;
  return std::filesystem::path(a.model).stem().string();
}

// The GGUF's tokenizer.chat_template, a Hugging Face folder's tokenizer_config.json template,
// or "" (llama2.c files, models without one).
std::string read_chat_template(const std::string& path) {
  if (std::filesystem::is_directory(path)) return tokenizer::load_hf_tokenizer(path).chat_template;
  if (std::filesystem::path(path).extension() != ".gguf") {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    char magic[4] = {};
    const bool gguf = f && std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
    if (f) std::fclose(f);
    if (!gguf) return "";
  }
  return gguf::GgufFile::open(path).get_string_or("tokenizer.chat_template", "");
}

// The task a model trained by `shrike train` carries (none for other models and formats).
std::optional<data::TaskDefinition> read_task(const std::string& path) {
  if (std::filesystem::path(path).extension() != ".gguf") return std::nullopt;
  return data::task_from_gguf(gguf::GgufFile::open(path));
}

// The effective settings (after the engine's own adjustments, e.g. int8-mixed turns the prefix
// cache off) for /v1/models: `shrike optimize` reads them to show what differs between stages.
std::map<std::string, std::string> serving_options(const ServeArgs& a, const model::Model& m,
                                                   const engine::Engine& e, bool has_task) {
  const engine::EngineConfig& c = e.config();
  const bool is_static = c.scheduler.mode == engine::BatchingMode::Static;
  std::map<std::string, std::string> o = {
      {"model_file", std::filesystem::path(a.model).filename().string()},
      {"weight_type", std::string(dtype_name(m.weights().weight_type()))},
      {"weight_bytes", std::to_string(m.total_weight_bytes())},
      {"parameters", std::to_string(m.parameter_count())},
      {"vocab_size", std::to_string(m.config().vocab_size)},
      {"kv_type", c.kv.describe()},
      {"kv_bytes", std::to_string(e.gauges().kv_bytes_total)},
      {"kv_blocks", std::to_string(c.kv_blocks)},
      {"kv_block_size", std::to_string(c.block_size)},
      {"kv_allocation", is_static ? "each request's maximum length, reserved at admission"
                                  : "paged, block by block as sequences grow"},
      {"batching", is_static ? "static" : "continuous"},
      {"max_seqs", std::to_string(c.scheduler.max_seqs)},
      {"prefix_cache", c.scheduler.prefix_caching ? "on" : "off"},
      {"context_length", std::to_string(e.context_length())}};
  if (is_static) o["batch_size"] = std::to_string(c.scheduler.batch_size);
  // Constrained decoding: the model's own task schema (on by default for task models) and
  // jump-forward over forced tokens.
  o["task_schema"] = has_task && !a.no_task_schema ? "on" : "off";
  o["jump_forward"] = c.jump_forward ? "on" : "off";
  o["speculative"] = engine::spec_mode_name(c.spec.mode);
  if (c.spec.enabled()) {
    o["spec_k"] = std::to_string(c.spec.max_k);
    if (c.spec.mode == engine::SpecMode::Draft)
      o["draft_model"] = std::filesystem::path(a.spec.draft).filename().string();
    o["batch_invariant"] = c.batch_invariant ? "on" : "off";
  }
  return o;
}

int run_serve(ServeArgs a) {
  a.server.model_name = model_id(a);
  a.server.max_body_bytes = size_t(a.max_body_mb * 1024 * 1024);
  if (a.server.http_threads <= 0)
    a.server.http_threads = int(std::max<int64_t>(64, a.engine.scheduler.max_seqs + 32));
  a.engine.scheduler.mode =
      a.batching == "static" ? engine::BatchingMode::Static : engine::BatchingMode::Continuous;
  a.engine.scheduler.prefix_caching = !a.no_prefix_cache;
  if (a.kv_cache_mb > 0) a.engine.kv_cache_bytes = size_t(a.kv_cache_mb) << 20;
  resolve_kv_cache_options(a.kv_args, a.engine.kv);

  SignalPipe signals;
  server::HttpServer http(a.server);
  const int port = http.bind();
  std::thread server_thread([&] { http.serve(); });
  std::atomic<bool> signalled{false};
  std::thread watcher([&] { watch_signals(signals, http, a.drain_timeout_s, signalled); });
  // Runs on every way out, so no thread is left joinable.
  struct Finish {
    server::HttpServer& http;
    SignalPipe& signals;
    std::thread &server_thread, &watcher;
    ~Finish() {
      http.stop();
      if (server_thread.joinable()) server_thread.join();
      signals.wake();
      if (watcher.joinable()) watcher.join();
    }
  };

  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<model::Model> draft;  // --spec draft; outlives the engine
  std::unique_ptr<engine::Engine> engine;
  {
    Finish finish_on_error{http, signals, server_thread, watcher};
    model = model::load_model(a.model);
    tok = load_tokenizer(a.model, a.tokenizer, model->config().vocab_size);
    server::ChatFormat format = server::ChatFormat::Plain;
    if (!a.chat_template.empty()) {
      // A format name, or a file holding a Jinja template to recognise.
      if (auto named = server::chat_format_from_name(a.chat_template)) {
        format = *named;
      } else {
        std::ifstream in(a.chat_template, std::ios::binary);
        if (!in) throw FileError(a.chat_template + ": not a chat format name nor a readable file");
        std::ostringstream text;
        text << in.rdbuf();
        format = server::detect_chat_format(text.str());
      }
    } else {
      format = server::detect_chat_format(read_chat_template(a.model));
    }
    if (a.ctx > 0) {
      a.engine.scheduler.context_length = a.ctx;
    } else {
      a.engine.scheduler.context_length = model->config().context_length;
    }
    a.engine.spec = resolve_spec_options(a.spec, *model, draft);
    engine = std::make_unique<engine::Engine>(*model, *tok, a.engine);
    auto task = read_task(a.model);
    const bool has_task = task.has_value();
    if (task) {
      std::fprintf(stderr,
                   "shrike serve: task %s, %zu intents, %zu slots; POST /v1/intent; answers %s\n",
                   task->format.c_str(), task->intents.size(), task->slots.size(),
                   a.no_task_schema ? "free-form (--no-task-schema)"
                                    : "constrained to the task's schema by default");
      http.set_task(std::move(task), !a.no_task_schema);
    }
    if (a.engine.spec.enabled())
      std::fprintf(stderr,
                   "shrike serve: speculative decoding %s, k <= %d, below %lld tokens per step%s\n",
                   engine::spec_mode_name(a.engine.spec.mode), a.engine.spec.max_k,
                   (long long)a.engine.spec.max_batch_tokens,
                   engine->config().batch_invariant ? ", batch-invariant products" : "");
    http.attach(*engine, format, serving_options(a, *model, *engine, has_task));
    std::fprintf(stderr, "shrike serve: model '%s' (%s), context %lld, chat format %s\n",
                 a.server.model_name.c_str(), model->describe().c_str(),
                 (long long)engine->context_length(), server::chat_format_name(format));
    const engine::EngineGauges g = engine->gauges();
    std::fprintf(stderr,
                 "shrike serve: KV cache %s, %lld blocks of %lld positions, %.0f MiB (%.1f "
                 "bytes per position)\n",
                 a.engine.kv.describe().c_str(), (long long)engine->config().kv_blocks,
                 (long long)engine->config().block_size, double(g.kv_bytes_total) / (1 << 20),
                 g.kv_bytes_per_token);
    // Tests and scripts wait for this line: it means ready, so not after a signal while loading.
    if (!signalled.load())
      std::fprintf(stderr, "shrike serve: listening on http://%s:%d\n", a.server.host.c_str(),
                   port);
    std::fflush(stderr);
    server_thread.join();  // until the watcher (or an error) stops the server
  }
  // The HTTP server has stopped: no thread can reach the engine any more.
  engine->shutdown();
  std::fprintf(stderr, "shrike serve: stopped\n");
  return 0;
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  app.add_option("model,-m,--model", a->model, "model file (.gguf or llama2.c .bin)")->required();
  app.add_option("--tokenizer", a->tokenizer,
                 "tokenizer (llama2.c tok*.bin or .gguf); default: the model's own");
  app.add_option("--host", a->server.host, "address to listen on")->capture_default_str();
  app.add_option("--port", a->server.port, "port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--api-key", a->server.api_key,
                 "require 'Authorization: Bearer KEY' (not for /health and /metrics)");
  app.add_option("--model-name", a->server.model_name,
                 "model id in /v1/models and requests (default: the file name without extension)");
  app.add_option("--chat-template", a->chat_template,
                 "chat format: chatml, llama3, llama2, mistral, phi3, gemma, deepseek2, deepseek3, "
                 "plain, or a file holding a Jinja template (default: recognised from the model)");
  app.add_option("-t,--threads", a->engine.threads, "compute threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ctx", a->ctx, "context length (default: the model's)")
      ->check(CLI::NonNegativeNumber);
  auto& s = a->engine.scheduler;
  app.add_option("--max-batch-tokens", s.max_batch_tokens, "tokens computed per engine step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-seqs", s.max_seqs, "sequences running at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-queue", s.max_queue, "requests waiting; more get 429")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--batching", a->batching, "continuous | static")
      ->check(CLI::IsMember({"continuous", "static"}))
      ->capture_default_str();
  app.add_option("--batch-size", s.batch_size, "static batching: sequences per batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-wait-ms", s.batch_wait_ms,
                 "static batching: longest wait for a batch to fill")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--block-size", a->engine.block_size, "KV cache block size in tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--kv-blocks", a->engine.kv_blocks,
                 "KV cache blocks (default: max-seqs full contexts, within --kv-cache-mb)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-cache-mb", a->kv_cache_mb, "KV cache memory cap in MiB (default 2048)")
      ->check(CLI::PositiveNumber);
  add_kv_cache_options(
      app, a->kv_args, a->engine.kv,
      "KV cache: f16 (half the memory and attention reads of f32) | f32 | int8 (one f32 scale per "
      "position and kv head) | int8-mixed (int8, with f16 copies of sinks, the recent window, "
      "heavy hitters and --kv-fp16-layers; no prefix cache)");
  app.add_flag("--no-prefix-cache", a->no_prefix_cache, "do not reuse cached prompt prefixes");
  app.add_flag("--no-task-schema", a->no_task_schema,
               "a task model (shrike.task.* in its GGUF) answers requests without a constraint "
               "free-form instead of in its task's JSON schema");
  app.add_flag(
      "--no-jump-forward", [a](int64_t) { a->engine.jump_forward = false; },
      "step through tokens a constraint forces, one model call each (same output)");
  app.add_flag("--batch-invariant", a->engine.batch_invariant,
               "float weights: outputs independent of what else is batched (slower alone)");
  add_spec_options(app, a->spec);
  app.add_option("--drain-timeout", a->drain_timeout_s,
                 "seconds SIGTERM waits for running requests before exiting")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-body-mb", a->max_body_mb, "largest request body in MiB; larger get 413")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--request-timeout", a->server.request_timeout_s,
                 "deadline in seconds of requests that set no 'timeout' (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--http-threads", a->server.http_threads,
                 "HTTP worker threads; each open connection holds one (default: max(64, "
                 "max-seqs + 32))")
      ->check(CLI::NonNegativeNumber);
  return [a] { return run_serve(*a); };
}

}  // namespace shrike::cli
