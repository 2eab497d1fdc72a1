// The engine's public side: configuration, submission (validation, the queue limit), gauges and
// shutdown. The engine thread's work is in engine_core.cc.
#include "engine/engine.h"

#include <algorithm>
#include <stdexcept>

#include "engine/engine_core.h"
#include "kv/budget.h"

namespace shrike::engine {

Engine::Engine(const model::Model& model, const tokenizer::Tokenizer& tok, EngineConfig config)
    : model_(model), tok_(tok), config_(std::move(config)) {
  const auto& mc = model_.config();
  auto& sc = config_.scheduler;
  sc.context_length =
      sc.context_length > 0 ? std::min(sc.context_length, mc.context_length) : mc.context_length;
  if (config_.block_size < 1) throw std::invalid_argument("block size must be at least 1");
  if (sc.max_queue < 0) throw std::invalid_argument("max queue must not be negative");
  config_.kv.validate(mc.n_layers);
  // A reused block would come without the sequence's f16 copies and weight sums (engine.h).
  if (config_.kv.mixed()) sc.prefix_caching = false;
  if (config_.spec.enabled()) {
    if (const std::string e = config_.spec.error(model_); !e.empty())
      throw std::invalid_argument(e);
    // Verification rows must be the bits one-token steps give (speculation.h).
    if (needs_batch_invariance(model_)) config_.batch_invariant = true;
  }
  int64_t n_blocks = config_.kv_blocks;
  if (config_.kv_budget) {
    // A shared budget: the pool may grow to the whole budget (the ledger keeps the sum within it
    // and the other models' minimums out of reach); its memory is committed block by block.
    if (config_.kv.mixed())
      throw std::invalid_argument(
          "a shared KV memory budget needs a paged cache type (f16, f32, int8), not int8-mixed");
    const size_t block_bytes = config_.kv_budget->block_bytes();
    const size_t cap = std::min(config_.kv_cache_bytes, config_.kv_budget->ledger().total_bytes());
    if (n_blocks <= 0) n_blocks = int64_t(cap / block_bytes);
    if (n_blocks < 1) throw std::invalid_argument("the KV memory budget holds no block");
  }
  if (n_blocks <= 0)
    n_blocks = kv::blocks_within_budget(config_.kv, mc.kv_dims(),
                                        {config_.kv_cache_bytes, config_.block_size,
                                         sc.context_length, sc.max_seqs, sc.max_batch_tokens});
  // The engine enforces max_queue at submit(); the scheduler's own limit only has to never bite.
  SchedulerConfig inner = sc;
  inner.max_queue = sc.max_queue + sc.max_seqs + 16;
  EngineConfig effective = config_;
  effective.scheduler = inner;
  effective.kv_blocks = n_blocks;
  config_.kv_blocks = n_blocks;
  core_ = std::make_unique<EngineCore>(model_, tok_, effective, metrics_);
  thread_ = std::thread([this] { core_->run(); });
}

Engine::~Engine() {
  shutdown();
}

SubmitResult Engine::submit(GenerationRequest req) {
  SubmitResult r;
  const int64_t ctx = context_length();
  if (req.prompt.empty()) {
    r.message = "the prompt has no tokens";
    return r;
  }
  if (int64_t(req.prompt.size()) >= ctx) {
    r.message = "the prompt has " + std::to_string(req.prompt.size()) +
                " tokens; the context holds " + std::to_string(ctx) +
                " and at least one must be left for the output";
    return r;
  }
  for (int32_t t : req.prompt)
    if (t < 0 || t >= model_.config().vocab_size) {
      r.message = "token id " + std::to_string(t) + " is outside the vocabulary (" +
                  std::to_string(model_.config().vocab_size) + ")";
      return r;
    }
  if (req.max_tokens < 1) {
    r.message = "max_tokens must be at least 1";
    return r;
  }
  if (std::string e = decode::sampler_params_error(req.sampling); !e.empty()) {
    r.message = e;
    return r;
  }
  req.max_tokens = std::min<int64_t>(req.max_tokens, ctx - int64_t(req.prompt.size()));
  if (draining_.load()) {
    r.status = SubmitStatus::Draining;
    r.message = "the server is shutting down";
    metrics_.rejected.fetch_add(1);
    return r;
  }
  auto stream = std::make_shared<RequestStream>();
  Inbox& inbox = core_->inbox();
  {
    std::lock_guard lock(inbox.mu);
    if (inbox.stop) {
      r.status = SubmitStatus::Draining;
      r.message = "the server is shutting down";
      metrics_.rejected.fetch_add(1);
      return r;
    }
    if (int64_t(inbox.incoming.size()) + core_->status().waiting.load() >=
        config_.scheduler.max_queue) {
      r.status = SubmitStatus::QueueFull;
      r.message = "the queue is full (" + std::to_string(config_.scheduler.max_queue) +
                  " requests waiting); retry later";
      metrics_.rejected.fetch_add(1);
      return r;
    }
    metrics_.prompt_tokens.fetch_add(int64_t(req.prompt.size()));
    core_->in_flight_add();
    inbox.incoming.push_back({inbox.next_id++, std::move(req), stream, Clock::now()});
  }
  inbox.cv.notify_one();
  r.status = SubmitStatus::Accepted;
  r.stream = std::move(stream);
  return r;
}

void Engine::drain() {
  draining_.store(true);
}

bool Engine::idle() const {
  return core_->status().in_flight.load() == 0;
}

void Engine::shutdown() {
  if (!core_) return;
  {
    std::lock_guard lock(core_->inbox().mu);
    core_->inbox().stop = true;
  }
  core_->inbox().cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineGauges Engine::gauges() const {
  EngineGauges g;
  const EngineStatus& im = core_->status();
  const kv::KvStorage& storage = core_->storage();
  g.running = im.running.load();
  g.waiting = im.waiting.load();
  g.kv_blocks_used = im.blocks_used.load();
  g.kv_blocks_cached = im.blocks_cached.load();
  g.kv_blocks_total = config_.kv_blocks;
  g.kv_blocks_committed = im.blocks_committed.load();
  g.kv_blocks_usable = g.kv_blocks_total;
  if (config_.kv_budget)
    g.kv_blocks_usable =
        std::min(g.kv_blocks_total, g.kv_blocks_committed + config_.kv_budget->headroom_blocks());
  g.kv_bytes_total = int64_t(storage.bytes());
  g.kv_f16_copy_bytes = im.f16_copy_bytes.load();
  g.kv_bytes_used = g.kv_blocks_used * int64_t(storage.block_bytes()) + im.mixed_bytes.load();
  g.kv_tokens_used = im.tokens_used.load();
  g.kv_type = kv::kv_type_name(config_.kv.type);
  g.kv_bytes_per_token = storage.bytes_per_token();
  g.prefix_queried_tokens = im.prefix_queried.load();
  g.prefix_hit_tokens = im.prefix_hit.load();
  return g;
}

}  // namespace shrike::engine
