// The engine loop. One thread owns the scheduler, the block pool, the KV memory and the model's
// scratch; HTTP threads only touch the incoming queue (under a mutex), the request streams and
// atomics.
#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kv/budget.h"
#include "kv/kv_storage.h"
#include "kv/mixed_precision.h"
#include "kv/paged_kv.h"
#include "tokenizer/stream.h"

namespace shrike::engine {

// ---- RequestStream ---------------------------------------------------------------------------

bool RequestStream::next(StreamEvent& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (consumed_done_) return false;
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  out = std::move(events_.front());
  events_.pop_front();
  if (out.finished) consumed_done_ = true;
  return true;
}

void RequestStream::push(StreamEvent ev) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = ev.finished;
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

// ---- Engine ----------------------------------------------------------------------------------

namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Length of the longest suffix of text that is a proper prefix of some stop string: those bytes
// are held back, since the next token may complete the stop string.
size_t held_suffix(const std::string& text, size_t from, const std::vector<std::string>& stops) {
  size_t held = 0;
  for (const auto& s : stops) {
    const size_t max = std::min(s.size() - 1, text.size() - from);
    for (size_t len = max; len > held; --len)
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        held = len;
        break;
      }
  }
  return held;
}

// The final event of a request that never ran.
StreamEvent final_event(FinishReason reason, int64_t prompt_tokens, std::string error) {
  StreamEvent ev;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = std::move(error);
  ev.prompt_tokens = prompt_tokens;
  return ev;
}

}  // namespace

struct Engine::Impl {
  // One accepted request while the engine works on it.
  struct Active {
    GenerationRequest req;
    std::shared_ptr<RequestStream> stream;
    decode::Sampler sampler;
    tokenizer::StreamDecoder decoder;
    std::vector<int32_t> output;  // generated tokens
    std::string text;             // complete text generated so far (stop strings not yet cut)
    size_t sent = 0;              // bytes of text already sent
    Clock::time_point submitted, first_token{}, last_token{};
    bool scheduled = false;
    int64_t cached_prompt = 0;
    Active(GenerationRequest r, std::shared_ptr<RequestStream> s, const tokenizer::Tokenizer& tok,
           Clock::time_point now)
        : req(std::move(r)),
          stream(std::move(s)),
          sampler(req.sampling),
          decoder(tok),
          submitted(now) {}
  };
  struct Incoming {
    SeqId id;
    GenerationRequest req;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point submitted;
  };

  Impl(const EngineConfig& c, const model::ModelConfig& mc, int64_t n_blocks, int threads)
      : pool(n_blocks, c.block_size),
        storage(mc.n_layers, n_blocks, c.block_size, mc.n_kv_heads, mc.head_dim,
                c.kv.layer_formats(mc.n_layers)),
        scheduler(c.scheduler, pool),
        threads(threads) {}

  kv::BlockPool pool;
  kv::KvStorage storage;
  Scheduler scheduler;
  ThreadPool threads;
  std::unordered_map<SeqId, std::unique_ptr<Active>> active;
  std::vector<std::unique_ptr<kv::PagedKvView>> views;
  // int8-mixed: each running sequence's f16 copies and attention weight sums (dropped when it
  // ends or is preempted: it is then recomputed from position 0).
  std::unordered_map<SeqId, std::unique_ptr<kv::MixedPrecisionKv>> mixed;
  std::vector<float> logits;

  std::mutex mu;  // guards incoming, stop
  std::condition_variable cv;
  std::deque<Incoming> incoming;
  bool stop = false;
  SeqId next_id = 1;

  // Read by other threads (gauges(), submit()).
  std::atomic<int64_t> running{0}, waiting{0}, blocks_used{0}, blocks_cached{0};
  std::atomic<int64_t> f16_copy_bytes{0}, mixed_bytes{0}, tokens_used{0};
  std::atomic<int64_t> prefix_queried{0}, prefix_hit{0};
  std::atomic<int64_t> in_flight{0};  // accepted and not yet given their final event
};

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
  if (config_.batch_invariant) kernels::set_batch_invariant(true);
  int64_t n_blocks = config_.kv_blocks;
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
  impl_ = std::make_unique<Impl>(effective, mc, n_blocks,
                                 config_.threads > 0 ? config_.threads : default_thread_count());
  thread_ = std::thread([this] { loop(); });
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
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stop) {
      r.status = SubmitStatus::Draining;
      r.message = "the server is shutting down";
      metrics_.rejected.fetch_add(1);
      return r;
    }
    if (int64_t(impl_->incoming.size()) + impl_->waiting.load() >= config_.scheduler.max_queue) {
      r.status = SubmitStatus::QueueFull;
      r.message = "the queue is full (" + std::to_string(config_.scheduler.max_queue) +
                  " requests waiting); retry later";
      metrics_.rejected.fetch_add(1);
      return r;
    }
    metrics_.prompt_tokens.fetch_add(int64_t(req.prompt.size()));
    impl_->in_flight.fetch_add(1);
    impl_->incoming.push_back({impl_->next_id++, std::move(req), stream, Clock::now()});
  }
  impl_->cv.notify_one();
  r.status = SubmitStatus::Accepted;
  r.stream = std::move(stream);
  return r;
}

void Engine::drain() {
  draining_.store(true);
}

bool Engine::idle() const {
  return impl_->in_flight.load() == 0;
}

void Engine::shutdown() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineGauges Engine::gauges() const {
  EngineGauges g;
  const Impl& im = *impl_;
  g.running = im.running.load();
  g.waiting = im.waiting.load();
  g.kv_blocks_used = im.blocks_used.load();
  g.kv_blocks_cached = im.blocks_cached.load();
  g.kv_blocks_total = config_.kv_blocks;
  g.kv_bytes_total = int64_t(im.storage.bytes());
  g.kv_f16_copy_bytes = im.f16_copy_bytes.load();
  g.kv_bytes_used = g.kv_blocks_used * int64_t(im.storage.block_bytes()) + im.mixed_bytes.load();
  g.kv_tokens_used = im.tokens_used.load();
  g.kv_type = kv::kv_type_name(config_.kv.type);
  g.kv_bytes_per_token = im.storage.bytes_per_token();
  g.prefix_queried_tokens = im.prefix_queried.load();
  g.prefix_hit_tokens = im.prefix_hit.load();
  return g;
}

void Engine::loop() {
  Impl& im = *impl_;
  const auto& mc = model_.config();
  const int64_t vocab = mc.vocab_size;
  const int64_t ctx = context_length();

  auto publish = [&] {
    const kv::PoolStats ps = im.pool.stats();
    im.running.store(im.scheduler.n_running());
    im.waiting.store(im.scheduler.n_waiting());
    im.blocks_used.store(ps.blocks_in_use);
    im.blocks_cached.store(ps.blocks_cached);
    im.prefix_queried.store(ps.prefix_queried_tokens);
    im.prefix_hit.store(ps.prefix_hit_tokens);
    size_t copies = 0, state = 0;
    for (const auto& [id, m] : im.mixed) {
      copies += m->f16_bytes();
      state += m->bytes();
    }
    im.f16_copy_bytes.store(int64_t(copies));
    im.mixed_bytes.store(int64_t(state));
    int64_t tokens = 0;
    for (const auto& [id, a] : im.active)
      if (const SeqInfo* seq = im.scheduler.find(id); seq && seq->state == SeqState::Running)
        tokens += seq->n_computed;
    im.tokens_used.store(tokens);
  };

  // Sends whatever text is safe to send (not possibly the start of a stop string).
  auto emit = [&](Impl::Active& a, StreamEvent ev, bool final_flush) {
    size_t end = a.text.size();
    if (!final_flush) end -= held_suffix(a.text, a.sent, a.req.stop);
    ev.text = a.text.substr(a.sent, end - a.sent);
    a.sent = end;
    if (!ev.finished && ev.text.empty() && ev.tokens.empty()) return;
    a.stream->push(std::move(ev));
  };

  // Ends a request: final event with usage, metrics, blocks released.
  // cut_at_stop: the text was just cut before a stop string; nothing may follow it.
  auto end_request = [&](SeqId id, FinishReason reason, std::string error = {}, StreamEvent ev = {},
                         bool cut_at_stop = false) {
    auto it = im.active.find(id);
    if (it == im.active.end()) return;
    Impl::Active& a = *it->second;
    const auto now = Clock::now();
    if (!cut_at_stop) a.text += a.decoder.flush();
    ev.finished = true;
    ev.finish_reason = reason;
    ev.error = std::move(error);
    ev.prompt_tokens = int64_t(a.req.prompt.size());
    ev.completion_tokens = int64_t(a.output.size());
    ev.cached_prompt_tokens = a.cached_prompt;
    // Metrics and blocks first: whoever reads the final event then sees them settled.
    metrics_.finished[size_t(reason)].fetch_add(1);
    if (reason == FinishReason::Deadline) metrics_.timed_out.fetch_add(1);
    metrics_.e2e_latency.observe(seconds(now - a.submitted));
    if (a.output.size() >= 2)
      metrics_.time_per_output_token.observe(seconds(a.last_token - a.first_token) /
                                             double(a.output.size() - 1));
    im.scheduler.finish(id);
    im.mixed.erase(id);
    publish();
    im.in_flight.fetch_sub(1);
    emit(a, std::move(ev), true);
    im.active.erase(it);
  };

  // One sampled token: checks the end conditions, streams the text.
  auto on_token = [&](SeqId id, float* logits, const SeqInfo& seq) {
    Impl::Active& a = *im.active.at(id);
    const auto prompt = std::span<const int32_t>(a.req.prompt);
    const decode::SampleResult r =
        a.sampler.sample(logits, vocab, prompt, std::span<const int32_t>(a.output));
    const auto now = Clock::now();
    if (a.output.empty()) {
      a.first_token = now;
      metrics_.time_to_first_token.observe(seconds(now - a.submitted));
    } else {
      metrics_.inter_token_latency.observe(seconds(now - a.last_token));
    }
    a.last_token = now;
    const bool eos = !a.req.ignore_eos && (r.token == tok_.eos() || r.token == mc.eos_id);
    if (eos) return end_request(id, FinishReason::Stop);
    a.output.push_back(r.token);
    metrics_.generated_tokens.fetch_add(1);
    StreamEvent ev;
    ev.tokens.push_back(r.token);
    if (a.req.sampling.logprobs || a.req.sampling.top_logprobs > 0)
      ev.logprobs.push_back({r.token, r.logprob, r.top});
    const size_t before = a.text.size();
    a.text += a.decoder.push(r.token);
    // A stop string may have been completed: search only where the new text can reach.
    size_t max_stop = 0;
    for (const auto& s : a.req.stop) max_stop = std::max(max_stop, s.size());
    if (max_stop > 0) {
      const size_t from = before >= max_stop ? before - max_stop + 1 : 0;
      size_t found = std::string::npos;
      for (const auto& s : a.req.stop) {
        if (s.empty()) continue;
        const size_t f = a.text.find(s, std::max(from, a.sent));
        if (f != std::string::npos && f < found) found = f;
      }
      if (found != std::string::npos) {
        a.text.resize(found);
        return end_request(id, FinishReason::Stop, {}, std::move(ev), true);
      }
    }
    if (int64_t(a.output.size()) >= a.req.max_tokens || int64_t(seq.tokens.size()) + 1 >= ctx)
      return end_request(id, FinishReason::Length, {}, std::move(ev));
    im.scheduler.append_token(id, r.token);
    emit(a, std::move(ev), false);
  };

  for (;;) {
    std::deque<Impl::Incoming> arrived;
    {
      std::unique_lock lock(im.mu);
      if (im.stop) break;
      arrived.swap(im.incoming);
    }
    for (auto& in : arrived) {
      const auto len = int64_t(in.req.prompt.size());
      const int64_t max_tokens = in.req.max_tokens;
      auto a = std::make_unique<Impl::Active>(std::move(in.req), in.stream, tok_, in.submitted);
      if (!im.scheduler.add(in.id, a->req.prompt, max_tokens, in.submitted)) {
        in.stream->push(final_event(FinishReason::Error, len, "the queue is full"));
        im.in_flight.fetch_sub(1);
        continue;
      }
      im.active.emplace(in.id, std::move(a));
    }

    // Cancelled and expired requests end before planning, so their blocks are free for it.
    const auto now = Clock::now();
    std::vector<std::pair<SeqId, FinishReason>> ending;
    for (auto& [id, a] : im.active) {
      if (a->stream->cancelled())
        ending.push_back({id, FinishReason::Cancelled});
      else if (a->req.deadline && now >= *a->req.deadline)
        ending.push_back({id, FinishReason::Deadline});
    }
    for (auto [id, reason] : ending) end_request(id, reason);

    if (im.scheduler.idle()) {
      publish();
      std::unique_lock lock(im.mu);
      im.cv.wait(lock, [&] { return im.stop || !im.incoming.empty(); });
      continue;
    }

    StepPlan plan = im.scheduler.schedule(now);
    metrics_.preemptions.fetch_add(int64_t(plan.preempted.size()));
    for (SeqId id : plan.preempted) im.mixed.erase(id);  // recomputed from position 0
    for (SeqId id : plan.failed)
      end_request(id, FinishReason::Error,
                  "the request needs more KV cache than the server has (" +
                      std::to_string(config_.kv_blocks) + " blocks of " +
                      std::to_string(config_.block_size) + " tokens)");
    if (plan.empty()) {
      // Nothing can run now (a static batch is still forming): sleep until it forms, a request
      // arrives, or a deadline may have passed.
      publish();
      auto wake = std::min(im.scheduler.next_batch_deadline(), now + std::chrono::milliseconds(20));
      for (auto& [id, a] : im.active)
        if (a->req.deadline) wake = std::min(wake, *a->req.deadline);
      std::unique_lock lock(im.mu);
      im.cv.wait_until(lock, wake, [&] { return im.stop || !im.incoming.empty(); });
      continue;
    }

    // The batch: one view of the paged cache per sequence.
    std::vector<model::BatchSequence> batch;
    batch.reserve(plan.items.size());
    while (im.views.size() < plan.items.size())
      im.views.push_back(std::make_unique<kv::PagedKvView>(im.storage));
    int64_t n_logits = 0;
    for (size_t i = 0; i < plan.items.size(); ++i) {
      const PlanItem& item = plan.items[i];
      const SeqInfo* seq = im.scheduler.find(item.id);
      Impl::Active& a = *im.active.at(item.id);
      if (!a.scheduled) {
        a.scheduled = true;
        a.cached_prompt = seq->n_cached_prompt;
        metrics_.queue_wait.observe(seconds(now - a.submitted));
      }
      kv::MixedPrecisionKv* mixed = nullptr;
      if (config_.kv.mixed()) {
        auto& m = im.mixed[item.id];
        if (!m) m = std::make_unique<kv::MixedPrecisionKv>(config_.kv, mc.kv_dims());
        mixed = m.get();
      }
      im.views[i]->bind(seq->table.blocks(), mixed);
      batch.push_back({seq->tokens.data() + item.pos0, item.n_tokens, item.pos0, im.views[i].get(),
                       item.samples ? 1 : 0});
      n_logits += item.samples ? 1 : 0;
    }
    im.logits.resize(size_t(std::max<int64_t>(1, n_logits) * vocab));
    try {
      model_.forward_batch(batch.data(), int64_t(batch.size()), im.logits.data(), im.threads);
    } catch (const std::exception& e) {
      // Should not happen (the scheduler and submit() validate everything); fail the step's
      // requests rather than the whole server.
      for (const PlanItem& item : plan.items)
        end_request(item.id, FinishReason::Error, std::string("forward pass failed: ") + e.what());
      publish();
      continue;
    }
    im.scheduler.commit(plan);
    metrics_.steps.fetch_add(1);
    metrics_.batch_tokens.fetch_add(plan.total_tokens());
    int64_t row = 0;
    for (const PlanItem& item : plan.items) {
      if (!item.samples) continue;
      const SeqInfo* seq = im.scheduler.find(item.id);
      if (seq != nullptr) on_token(item.id, im.logits.data() + row * vocab, *seq);
      ++row;
    }
    publish();
  }

  // Shutting down: every request still known gets its final event.
  std::vector<SeqId> ids;
  for (auto& [id, a] : im.active) ids.push_back(id);
  for (SeqId id : ids) end_request(id, FinishReason::Cancelled);
  std::lock_guard lock(im.mu);
  for (auto& in : im.incoming)
    in.stream->push(final_event(FinishReason::Cancelled, int64_t(in.req.prompt.size()), {}));
  im.in_flight.fetch_sub(int64_t(im.incoming.size()));
  im.incoming.clear();
  publish();
}

}  // namespace shrike::engine
