// `shrike serve`: one or several models behind an OpenAI-compatible HTTP API, routed by the
// request's "model". The port is bound first (so /health can say "loading"), then the models
// load, each with its own engine; the engines share one thread pool (one step at a time) and,
// with several models or --kv-memory, one KV memory budget with a guaranteed minimum per model.
// SIGTERM or SIGINT drains: new requests get 503, running ones finish (up to --drain-timeout),
// then it exits 0.
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
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
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/kernel_options.h"
#include "cli/kv_options.h"
#include "cli/model_files.h"
#include "cli/spec_options.h"
#include "core/dtype.h"
#include "core/file_buffer.h"
#include "core/memory_release.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "kv/kv_storage.h"
#include "kv/shared_budget.h"
#include "model/model.h"
#include "server/http_server.h"
#include "task/task_definition.h"
#include "task/task_serving.h"
#include "tokenizer/hf_tokenizer.h"

namespace shrike::cli {
namespace {

struct ServeArgs {
  std::vector<std::string> models;  // PATH or NAME=PATH
  std::string model_name;           // the single model's name (--model-name)
  std::string tokenizer, chat_template;
  double kv_memory_mb = 0;  // the shared KV budget; 0: none with one model, 2048 with several
  double kv_min_mb = 0;     // each model's guaranteed share; 0: see kv_min_bytes()
  std::string metrics_compat;
  server::ServerOptions server;
  engine::EngineConfig engine;
  std::string batching = "continuous";
  int64_t ctx = 0;
  int64_t kv_cache_mb = 0;
  KvCacheArgs kv_args{"f16", {}};
  bool no_prefix_cache = false, bf16_dot = false;
  bool no_task_schema = false;
  double drain_timeout_s = 30;
  double max_body_mb = 8;
  double max_header_kb = 16;
  double send_buffer_kb = 256;
  bool max_connections_given = false;  // --max-connections on the command line
  SpecArgs spec;
};

// Every open connection is a file descriptor: raise the soft limit to the hard one, and hold
// --max-connections below what that allows (model files, sockets and pipes need some too). The
// default adapts quietly; a limit the user asked for and cannot have is said on stderr.
void fit_connections_to_fd_limit(server::ServerOptions& o, bool asked) {
  constexpr size_t kReserve = 256;
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max && r.rlim_cur < o.max_connections + kReserve) {
    r.rlim_cur = r.rlim_max == RLIM_INFINITY ? rlim_t(o.max_connections + kReserve) : r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  if (r.rlim_cur != RLIM_INFINITY && o.max_connections + kReserve > r.rlim_cur) {
    const size_t fit = r.rlim_cur > 2 * kReserve ? size_t(r.rlim_cur) - kReserve : 16;
    if (asked)
      std::fprintf(stderr,
                   "shrike serve: --max-connections %zu lowered to %zu (open-file limit %llu)\n",
                   o.max_connections, fit, (unsigned long long)r.rlim_cur);
    o.max_connections = fit;
  }
}

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

struct ModelSpec {
  std::string name, path;
};

// "PATH" (named after the file, without extension) or "NAME=PATH" (when the text as a whole is
// not an existing path).
std::vector<ModelSpec> model_specs(const ServeArgs& a) {
  std::vector<ModelSpec> out;
  for (const std::string& m : a.models) {
    const size_t eq = m.find('=');
    if (eq != std::string::npos && eq > 0 && !std::filesystem::exists(m))
      out.push_back({m.substr(0, eq), m.substr(eq + 1)});
    else
      out.push_back({std::filesystem::path(m).stem().string(), m});
  }
  if (!a.model_name.empty()) {
    if (out.size() != 1)
      throw std::invalid_argument(
          "--model-name names a single model; with several give each as NAME=PATH");
    out[0].name = a.model_name;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].name.empty() || out[i].path.empty())
      throw std::invalid_argument("model '" + a.models[i] + "': expected PATH or NAME=PATH");
    for (size_t j = 0; j < i; ++j)
      if (out[j].name == out[i].name)
        throw std::invalid_argument("two models are named '" + out[i].name +
                                    "': name them with NAME=PATH");
  }
  if (out.size() > 1) {
    // Options that belong to one model's files.
    if (!a.tokenizer.empty())
      throw std::invalid_argument("--tokenizer applies to a single model (several given)");
    if (!a.spec.draft.empty())
      throw std::invalid_argument("--draft applies to a single model (several given)");
  }
  return out;
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
std::optional<task::TaskDefinition> read_task(const std::string& path) {
  if (std::filesystem::path(path).extension() != ".gguf") return std::nullopt;
  return task::task_from_gguf(gguf::GgufFile::open(path));
}

// The effective settings (after the engine's own adjustments, e.g. int8-mixed turns the prefix
// cache off) for /v1/models: `shrike optimize` reads them to show what differs between stages.
std::map<std::string, std::string> serving_options(const ServeArgs& a, const std::string& path,
                                                   const model::Model& m, const engine::Engine& e,
                                                   bool has_task) {
  const engine::EngineConfig& c = e.config();
  const bool is_static = c.scheduler.mode == engine::BatchingMode::Static;
  std::map<std::string, std::string> o = {
      {"model_file", std::filesystem::path(path).filename().string()},
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
  if (is_static) {
    o["batch_size"] = std::to_string(c.scheduler.batch_size);
    char wait[32];
    std::snprintf(wait, sizeof wait, "%g", c.scheduler.batch_wait_ms);
    o["batch_wait_ms"] = wait;
  }
  // Constrained decoding: the model's own task schema (on by default for task models) and
  // jump-forward over forced tokens.
  o["task_schema"] = has_task && !a.no_task_schema ? "on" : "off";
  o["jump_forward"] = c.jump_forward ? "on" : "off";
  o["speculative"] = engine::spec_mode_name(c.spec.mode);
  if (c.kv_budget) {
    o["kv_budget_shared_bytes"] = std::to_string(c.kv_budget->ledger().total_bytes());
    o["kv_min_bytes"] = std::to_string(c.kv_budget->min_bytes());
  }
  if (c.spec.enabled()) {
    o["spec_k"] = std::to_string(c.spec.max_k);
    if (c.spec.mode == engine::SpecMode::Draft)
      o["draft_model"] = std::filesystem::path(a.spec.draft).filename().string();
    o["batch_invariant"] = c.batch_invariant ? "on" : "off";
  }
  return o;
}

// What every model of this server shares: the compute threads and the KV memory budget.
struct Shared {
  std::shared_ptr<engine::SharedCompute> compute;
  std::shared_ptr<kv::KvMemoryLedger> ledger;  // null: each engine its own kv_cache_bytes
};

server::ChatFormat chat_format_for(const ServeArgs& a, const std::string& path) {
  if (a.chat_template.empty()) return server::detect_chat_format(read_chat_template(path));
  // A format name, or a file holding a Jinja template to recognise.
  if (auto named = server::chat_format_from_name(a.chat_template)) return *named;
  std::ifstream in(a.chat_template, std::ios::binary);
  if (!in) throw FileError(a.chat_template + ": not a chat format name nor a readable file");
  std::ostringstream text;
  text << in.rdbuf();
  return server::detect_chat_format(text.str());
}

// Loads one model with its engine. min_bytes: its guaranteed share of a shared KV budget (0:
// at least one sequence of its full context).
std::unique_ptr<server::ModelInstance> load_instance(ServeArgs a, const ModelSpec& spec,
                                                     const Shared& shared, size_t min_bytes) {
  auto inst = std::make_unique<server::ModelInstance>();
  inst->name = spec.name;
  inst->model = model::load_model(spec.path);
  const model::Model& model = *inst->model;
  inst->tokenizer = load_tokenizer(spec.path, a.tokenizer, model.config().vocab_size);
  inst->chat_format = chat_format_for(a, spec.path);
  a.engine.scheduler.context_length = a.ctx > 0 ? a.ctx : model.config().context_length;
  a.engine.spec = resolve_spec_options(a.spec, model, inst->draft);
  a.engine.compute = shared.compute;
  if (shared.ledger) {
    const int64_t ctx = std::min(a.engine.scheduler.context_length, model.config().context_length);
    const size_t block_bytes = kv::KvStorage::block_bytes_for(
        a.engine.kv.layer_formats(model.config().n_layers), a.engine.block_size,
        model.config().n_kv_heads, model.config().head_dim);
    // A request waiting alone must always fit in what is guaranteed, or a burst on another model
    // could leave it waiting for ever.
    const size_t one_context =
        size_t((ctx + a.engine.block_size - 1) / a.engine.block_size + 1) * block_bytes;
    a.engine.kv_budget = std::make_shared<kv::KvBudgetAccount>(
        shared.ledger, spec.name, std::max(min_bytes, one_context), block_bytes);
    a.engine.kv_cache_bytes = shared.ledger->total_bytes();
  }
  inst->engine = std::make_unique<engine::Engine>(model, *inst->tokenizer, a.engine);
  auto task = read_task(spec.path);
  const bool has_task = task.has_value();
  if (task)
    std::fprintf(stderr,
                 "shrike serve: %s: task %s, %zu intents, %zu slots; POST /v1/intent; answers %s\n",
                 spec.name.c_str(), task->format.c_str(), task->intents.size(), task->slots.size(),
                 a.no_task_schema ? "free-form (--no-task-schema)"
                                  : "constrained to the task's schema by default");
  if (task) inst->attachment = std::make_shared<task::TaskAttachment>(*task, !a.no_task_schema);
  const engine::Engine& eng = *inst->engine;
  if (a.engine.spec.enabled())
    std::fprintf(stderr,
                 "shrike serve: speculative decoding %s, k <= %d, below %lld tokens per step%s\n",
                 engine::spec_mode_name(a.engine.spec.mode), a.engine.spec.max_k,
                 (long long)a.engine.spec.max_batch_tokens,
                 eng.config().batch_invariant ? ", batch-invariant products" : "");
  inst->serving_options = serving_options(a, spec.path, model, eng, has_task);
  std::fprintf(stderr, "shrike serve: model '%s' (%s), context %lld, chat format %s\n",
               spec.name.c_str(), model.describe().c_str(), (long long)eng.context_length(),
               server::chat_format_name(inst->chat_format));
  const engine::EngineGauges g = eng.gauges();
  std::fprintf(stderr,
               "shrike serve: %s: KV cache %s, %lld blocks of %lld positions, %.0f MiB (%.1f "
               "bytes per position)%s\n",
               spec.name.c_str(), a.engine.kv.describe().c_str(), (long long)eng.config().kv_blocks,
               (long long)eng.config().block_size, double(g.kv_bytes_total) / (1 << 20),
               g.kv_bytes_per_token,
               a.engine.kv_budget ? ", committed as used within the shared budget" : "");
  return inst;
}

// The guaranteed KV share of each model given at start: --kv-min-mb, or half the budget split
// evenly (the other half is what bursts draw on).
size_t kv_min_bytes(const ServeArgs& a, size_t budget, size_t n_models) {
  if (a.kv_min_mb > 0) return size_t(a.kv_min_mb * 1024 * 1024);
  return budget / (2 * std::max<size_t>(1, n_models));
}

int run_serve(ServeArgs a) {
  limit_malloc_arenas();       // before the HTTP and engine threads start (core/memory_release.h)
  apply_bf16_dot(a.bf16_dot);  // before any model is packed (admin-loaded ones included)
  const std::vector<ModelSpec> specs = model_specs(a);
  a.server.max_body_bytes = size_t(a.max_body_mb * 1024 * 1024);
  a.server.max_header_bytes = size_t(a.max_header_kb * 1024);
  a.server.send_buffer_bytes = size_t(a.send_buffer_kb * 1024);
  fit_connections_to_fd_limit(a.server, a.max_connections_given);
  a.server.vllm_metrics = a.metrics_compat == "vllm";
  // A worker parses, tokenizes and submits a request, then the stream pump has it (a stream or
  // a whole answer holds no worker while it waits or generates), so the count does not grow with
  // the models or their batches.
  if (a.server.http_threads <= 0) a.server.http_threads = 64;
  a.engine.scheduler.mode =
      a.batching == "static" ? engine::BatchingMode::Static : engine::BatchingMode::Continuous;
  a.engine.scheduler.prefix_caching = !a.no_prefix_cache;
  if (a.kv_cache_mb > 0) a.engine.kv_cache_bytes = size_t(a.kv_cache_mb) << 20;
  resolve_kv_cache_options(a.kv_args, a.engine.kv);

  Shared shared;
  shared.compute = std::make_shared<engine::SharedCompute>(a.engine.threads);
  if (a.kv_memory_mb > 0 || specs.size() > 1 || !a.server.admin_key.empty()) {
    const double mb = a.kv_memory_mb > 0 ? a.kv_memory_mb : double(a.engine.kv_cache_bytes >> 20);
    shared.ledger = std::make_shared<kv::KvMemoryLedger>(size_t(mb * 1024 * 1024));
  }

  SignalPipe signals;
  server::HttpServer http(a.server);
  task::add_task_routes(http);  // POST /v1/intent (task/task_serving.h)
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
  {
    Finish finish_on_error{http, signals, server_thread, watcher};
    if (shared.ledger) {
      http.set_kv_ledger(shared.ledger);
      std::fprintf(stderr,
                   "shrike serve: KV memory budget %.0f MiB shared by the models, %.0f MiB "
                   "guaranteed to each\n",
                   double(shared.ledger->total_bytes()) / (1 << 20),
                   double(kv_min_bytes(a, shared.ledger->total_bytes(), specs.size())) / (1 << 20));
    }
    for (const ModelSpec& spec : specs)
      http.add_model(load_instance(
          a, spec, shared,
          shared.ledger ? kv_min_bytes(a, shared.ledger->total_bytes(), specs.size()) : 0));
    if (!a.server.admin_key.empty()) {
      // POST /admin/models: {"name", "path", "kv_min_mb" (optional)}.
      http.set_model_loader(
          [a, shared](const std::string& name, const std::string& path, const std::string& body) {
            size_t min_bytes = 0;
            const auto j = nlohmann::json::parse(body, nullptr, false);
            if (j.is_object() && j.contains("kv_min_mb")) {
              if (!j["kv_min_mb"].is_number() || j["kv_min_mb"].get<double>() < 0)
                throw std::invalid_argument("'kv_min_mb' must be a number >= 0");
              min_bytes = size_t(j["kv_min_mb"].get<double>() * 1024 * 1024);
            }
            ServeArgs one = a;
            one.tokenizer.clear();
            one.spec.draft.clear();
            if (one.spec.mode == "draft") one.spec.mode = "off";
            return load_instance(one, ModelSpec{name, path}, shared, min_bytes);
          });
      std::fprintf(stderr,
                   "shrike serve: admin routes on (POST /admin/models, DELETE "
                   "/admin/models/NAME)\n");
    }
    http.set_ready();
    std::fprintf(stderr, "shrike serve: %d HTTP workers\n", a.server.http_threads);
    // Tests and scripts wait for this line: it means ready, so not after a signal while loading.
    if (!signalled.load())
      std::fprintf(stderr, "shrike serve: listening on http://%s:%d\n", a.server.host.c_str(),
                   port);
    std::fflush(stderr);
    server_thread.join();  // until the watcher (or an error) stops the server
  }
  // The HTTP server has stopped: no thread can reach the engines any more; they stop with it.
  std::fprintf(stderr, "shrike serve: stopped\n");
  return 0;
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  app.add_option(
         "model,-m,--model", a->models,
         "model files (.gguf or llama2.c .bin), each PATH or NAME=PATH; requests choose one "
         "by its name in \"model\"")
      ->required();
  app.add_option("--tokenizer", a->tokenizer,
                 "tokenizer (llama2.c tok*.bin or .gguf); default: the model's own");
  app.add_option("--host", a->server.host, "address to listen on")->capture_default_str();
  app.add_option("--port", a->server.port, "port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--api-key", a->server.api_key,
                 "require 'Authorization: Bearer KEY' (not for /health and /metrics)");
  app.add_option("--model-name", a->model_name,
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
  app.add_option("--kv-memory", a->kv_memory_mb,
                 "KV memory budget in MiB shared by all models (default with several models or "
                 "--admin-key: --kv-cache-mb); memory is committed as blocks are first used")
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-min-mb", a->kv_min_mb,
                 "KV memory guaranteed to each model within --kv-memory, which a burst on another "
                 "model cannot take (default: half the budget split evenly; never less than one "
                 "full context)")
      ->check(CLI::PositiveNumber);
  app.add_option("--admin-key", a->server.admin_key,
                 "enable POST /admin/models {name, path} and DELETE /admin/models/NAME (adding "
                 "and removing models while serving), authorised by 'Bearer KEY'");
  app.add_option("--metrics-compat", a->metrics_compat,
                 "also expose vLLM's gauge names (vllm:num_requests_waiting, "
                 "vllm:num_requests_running, vllm:kv_cache_usage_perc), as the Gateway API "
                 "Inference Extension reads them")
      ->check(CLI::IsMember({"vllm"}));
  add_kv_cache_options(
      app, a->kv_args, a->engine.kv,
      "KV cache: f16 (half the memory and attention reads of f32) | f32 | int8 (one f32 scale per "
      "position and kv head) | int8-mixed (int8, with f16 copies of sinks, the recent window, "
      "heavy hitters and --kv-fp16-layers; no prefix cache)");
  app.add_flag("--no-prefix-cache", a->no_prefix_cache, "do not reuse cached prompt prefixes");
  add_bf16_dot_flag(app, a->bf16_dot);
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
                 "HTTP worker threads parsing and submitting complete requests (default: 64; "
                 "streams and answers being generated hold none)")
      ->check(CLI::NonNegativeNumber);
  // Slow and hostile clients: docs/SECURITY.md, "Limits of shrike serve".
  app.add_option("--header-timeout", a->server.header_timeout_s,
                 "seconds a request's head (request line and headers) may take to arrive, from "
                 "its first byte or the connection; then 408")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--body-timeout", a->server.body_timeout_s,
                 "seconds a request's body may take to arrive after its head; then 408")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--keep-alive-timeout", a->server.keep_alive_timeout_s,
                 "seconds an idle keep-alive connection stays open")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--write-timeout", a->server.write_timeout_s,
                 "seconds a response write waits for the client to read; then the connection "
                 "closes and its request is cancelled")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--send-buffer-kb", a->send_buffer_kb,
                 "kernel send buffer per connection in KiB: what a client that stops reading "
                 "leaves queued before --write-timeout runs (0: the kernel's autotuning, ~4 MiB)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option_function<size_t>(
         "--max-connections",
         [a](size_t n) {
           a->server.max_connections = n;
           a->max_connections_given = true;
         },
         "open connections; beyond it the oldest not being answered is closed, or the "
         "new one refused (503); lowered to fit the open-file limit")
      ->check(CLI::Range(size_t(1), size_t(1) << 20))
      ->default_str("4096");
  app.add_option("--max-header-kb", a->max_header_kb,
                 "largest request head (request line and headers) in KiB; larger get 431")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  // Fault injection for tests (engine.h, EngineConfig::test_fail_admission); not in --help.
  app.add_option("--test-fail-admission", a->engine.test_fail_admission,
                 "tests only: every Nth admitted request fails as out of memory")
      ->check(CLI::NonNegativeNumber)
      ->group("");
  app.add_option("--max-headers", a->server.max_headers, "most header lines; more get 431")
      ->check(CLI::Range(size_t(1), size_t(100000)))
      ->capture_default_str();
  return [a] { return run_serve(*a); };
}

}  // namespace shrike::cli
