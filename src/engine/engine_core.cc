#include "engine/engine_core.h"

#include <algorithm>
#include <exception>
#include <new>
#include <optional>
#include <utility>

namespace shrike::engine {
namespace {

// At most this many sequences (running and waiting) and an engine computes alone on its own
// thread when the shared pool is busy (EngineCore::run).
constexpr int64_t kSoloSeqs = 4;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The final event of a request that never reached the scheduler.
StreamEvent unscheduled_final_event(FinishReason reason, int64_t prompt_tokens, std::string error) {
  StreamEvent ev;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = std::move(error);
  ev.prompt_tokens = prompt_tokens;
  return ev;
}

}  // namespace

EngineCore::EngineCore(const model::Model& model, const tokenizer::Tokenizer& tok,
                       const EngineConfig& config, EngineMetrics& metrics)
    : model_(model),
      tok_(tok),
      config_(config),
      metrics_(metrics),
      pool_(config.kv_blocks, config.block_size),
      storage_(model.config().n_layers, config.kv_blocks, config.block_size,
               model.config().n_kv_heads, model.config().head_dim,
               config.kv.layer_formats(model.config().n_layers),
               config.kv_budget ? kv::KvStorage::Commit::Lazily : kv::KvStorage::Commit::Now),
      scheduler_(config.scheduler, pool_),
      compute_(config.compute ? config.compute : std::make_shared<SharedCompute>(config.threads)),
      threads_(compute_->pool()),
      spec_(config.spec, model, threads_) {
  forward_options_.matmul.batch_invariant = config.batch_invariant;
  if (config.kv_budget) pool_.set_budget(config.kv_budget);
}

void EngineCore::run() {
  while (admit()) {
    const auto now = Clock::now();
    expire(now);
    if (scheduler_.idle()) {
      wait_for_requests();
      continue;
    }
    // The compute threads are this engine's for one step (shared with other models' engines).
    // When another engine's step holds them and this one has little to do (a few sequences, no
    // drafting on the shared pool), it computes on its own thread now rather than wait a whole
    // step of the busy model per token: a light model keeps its latency during another's burst.
    std::optional<SharedCompute::Turn> turn;
    bool taken = false;
    turn.emplace(*compute_, taken);
    step_pool_ = &threads_;
    if (!taken) {
      turn.reset();
      if (!config_.spec.enabled() && scheduler_.n_running() + scheduler_.n_waiting() <= kSoloSeqs)
        step_pool_ = &solo_;
      else
        turn.emplace(*compute_);
    }
    const StepPlan plan = schedule(now);
    if (plan.empty()) {
      turn.reset();
      wait_until_runnable(now);
      continue;
    }
    {
      std::optional<SharedCompute::Solo> solo;
      if (step_pool_ == &solo_) solo.emplace(*compute_);
      if (execute(plan, now)) update(plan);
    }
    turn.reset();
    publish();
  }
  end_all_at_shutdown();
}

bool EngineCore::admit() {
  std::deque<Incoming> arrived;
  {
    std::lock_guard lock(inbox_.mu);
    if (inbox_.stop) return false;
    arrived.swap(inbox_.incoming);
    // submit() bounds the queue by incoming + waiting: count these as waiting now, under the
    // same lock, or a submit between this swap and the next publish() sees them nowhere and
    // lets the queue grow past max_queue. publish() stores the scheduler's exact count later.
    status_.waiting.fetch_add(int64_t(arrived.size()));
  }
  for (auto& in : arrived) {
    // Allocating a request's state can fail (std::bad_alloc): that request ends with an error
    // and the engine goes on; nothing of it has reached the scheduler yet.
    std::unique_ptr<Request> r;
    std::vector<int32_t> forced;
    try {
      ++admitted_;
      if (config_.test_fail_admission > 0 && admitted_ % config_.test_fail_admission == 0)
        throw std::bad_alloc();
      r = std::make_unique<Request>(in.req, in.stream, tok_, model_.config().eos_id, in.submitted);
      if (in.req.constraint)
        r->constrained = std::make_unique<ConstrainedDecoding>(
            in.req.constraint, in.req.jump_forward && config_.jump_forward);
      forced = initial_forced(*r, in.req.max_tokens);
    } catch (const std::bad_alloc&) {
      // Counted before the final event, so whoever reads that event sees the count.
      metrics_.finished[size_t(FinishReason::Error)].fetch_add(1);
      status_.in_flight.fetch_sub(1);
      in.stream->push(unscheduled_final_event(FinishReason::Error, int64_t(in.req.prompt.size()),
                                              "out of memory while admitting the request"));
      continue;
    }
    in.req.prompt.insert(in.req.prompt.end(), forced.begin(), forced.end());
    const int64_t max_tokens = std::max<int64_t>(1, in.req.max_tokens - int64_t(forced.size()));
    if (!scheduler_.add(in.id, std::move(in.req.prompt), max_tokens, in.submitted)) {
      in.stream->push(unscheduled_final_event(FinishReason::Error, int64_t(r->prompt.size()),
                                              "the queue is full"));
      status_.in_flight.fetch_sub(1);
      continue;
    }
    Request& added = *requests_.emplace(in.id, std::move(r)).first->second;
    // A constrained request's drafts are checked against its constraint (see speculation.h).
    spec_.add(in.id, in.req.sampling, added.constrained.get());
    if (added.constrained) take_forced(in.id, added, forced, int64_t(added.prompt.size()));
  }
  return true;
}

void EngineCore::expire(Clock::time_point now) {
  std::vector<std::pair<SeqId, FinishReason>> ending;
  for (const auto& [id, r] : requests_) {
    if (r->stream->cancelled())
      ending.push_back({id, FinishReason::Cancelled});
    else if (r->deadline && now >= *r->deadline)
      ending.push_back({id, FinishReason::Deadline});
  }
  for (const auto& [id, reason] : ending) end(id, reason);
}

StepPlan EngineCore::schedule(Clock::time_point now) {
  metrics_.spec_draft_ns.fetch_add(int64_t(spec_.propose(scheduler_) * 1e9));
  // Under a shared KV budget the plan counts on the blocks reserved here; the rest goes back.
  pool_.reserve_growth();
  StepPlan plan = scheduler_.schedule(now);
  pool_.return_growth();
  spec_.planned(scheduler_);
  metrics_.preemptions.fetch_add(int64_t(plan.preempted.size()));
  for (SeqId id : plan.preempted) mixed_.erase(id);  // recomputed from position 0
  for (SeqId id : plan.failed)
    end(id, FinishReason::Error,
        "the request needs more KV cache than the server has (" +
            std::to_string(config_.kv_blocks) + " blocks of " + std::to_string(config_.block_size) +
            " tokens)");
  return plan;
}

kv::PagedKvView& EngineCore::bind_view(size_t i, const PlanItem& item, const SeqInfo& seq) {
  while (views_.size() <= i) views_.push_back(std::make_unique<kv::PagedKvView>(storage_));
  kv::MixedPrecisionKv* mixed = nullptr;
  if (config_.kv.mixed()) {
    auto& m = mixed_[item.id];
    if (!m) m = std::make_unique<kv::MixedPrecisionKv>(config_.kv, model_.config().kv_dims());
    mixed = m.get();
  }
  views_[i]->bind(seq.table.blocks(), mixed);
  return *views_[i];
}

bool EngineCore::execute(const StepPlan& plan, Clock::time_point now) {
  batch_.clear();
  int64_t n_logits = 0;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const PlanItem& item = plan.items[i];
    const SeqInfo& seq = *scheduler_.find(item.id);
    Request& r = *requests_.at(item.id);
    ++r.model_steps;
    if (!r.scheduled) {
      r.scheduled = true;
      r.output.set_cached_prompt(seq.n_cached_prompt);
      metrics_.queue_wait.observe(seconds(now - r.submitted));
    }
    const int64_t rows = item.samples ? 1 + item.n_draft : 0;  // drafts: verified rows
    batch_.push_back(
        {seq.tokens.data() + item.pos0, item.n_tokens, item.pos0, &bind_view(i, item, seq), rows});
    n_logits += rows;
  }
  logits_.resize(size_t(std::max<int64_t>(1, n_logits) * model_.config().vocab_size));
  try {
    const auto t0 = Clock::now();
    model_.forward_batch(batch_.data(), int64_t(batch_.size()), logits_.data(), *step_pool_,
                         scratch_, forward_options_);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0);
    metrics_.forward_ns.fetch_add(ns.count());
    spec_.observe_step(plan.total_tokens(), double(ns.count()) * 1e-9);
  } catch (const std::exception& e) {
    // Should not happen (the scheduler and submit() validate everything); fail the step's
    // requests rather than the whole server.
    for (const PlanItem& item : plan.items)
      end(item.id, FinishReason::Error, std::string("forward pass failed: ") + e.what());
    return false;
  }
  return true;
}

void EngineCore::update(const StepPlan& plan) {
  scheduler_.commit(plan);
  metrics_.steps.fetch_add(1);
  metrics_.batch_tokens.fetch_add(plan.total_tokens());
  int64_t row = 0;
  for (const PlanItem& item : plan.items) {
    if (!item.samples) continue;
    float* rows = logits_.data() + row * model_.config().vocab_size;
    if (const SeqInfo* seq = scheduler_.find(item.id)) {
      if (item.n_draft > 0)
        verify(item, rows);
      else
        sample(item.id, rows, *seq);
    }
    row += 1 + item.n_draft;
  }
}

void EngineCore::sample(SeqId id, float* logits, const SeqInfo& seq) {
  Request& r = *requests_.at(id);
  decode::SampleResult s;
  if (!choose(r, logits, s))
    return end(id, FinishReason::Error, "the constraint allows no token here");
  if (!emit(id, r, s, int64_t(seq.tokens.size()))) return;
  scheduler_.append_token(id, s.token);
  if (r.constrained) jump_forward(id, r, int64_t(seq.tokens.size()));
}

void EngineCore::verify(const PlanItem& item, float* rows) {
  Request& r = *requests_.at(item.id);
  const SeqInfo& seq = *scheduler_.find(item.id);
  const int64_t n_vocab = model_.config().vocab_size;
  const int64_t settled = int64_t(seq.tokens.size()) - item.n_draft;
  std::vector<int32_t> draft(seq.tokens.begin() + settled, seq.tokens.end());
  // Constrained: each row is sampled under its position's mask, and a forced position takes its
  // token without a draw (log probability 0), as choose() does without speculation. Drafts are
  // checked when proposed, so the constraint allows all of them (resize is a safety net).
  std::vector<char> forced;
  if (r.constrained) draft.resize(r.constrained->mask_rows(draft, rows, n_vocab, &forced));
  const decode::Verification v =
      spec_.verify(item.id, r.sampler, rows, n_vocab, draft, r.prompt, r.output.output(), settled);
  metrics_.spec_steps.fetch_add(1);
  metrics_.spec_proposed.fetch_add(int64_t(draft.size()));
  metrics_.spec_accepted.fetch_add(v.accepted);
  // Rejected drafts leave the cache (the accepted ones keep their keys and values).
  const kv::Truncation t = scheduler_.truncate(item.id, settled + v.accepted);
  if (t.needs_copy()) storage_.copy_block(t.copy_src, t.copy_dst);
  if (const auto m = mixed_.find(item.id); m != mixed_.end()) m->second->truncate(t.kept);
  // One token at a time, as without speculation: a stop ends the request and drops the rest.
  for (size_t j = 0; j < v.tokens.size(); ++j) {
    decode::SampleResult s;
    s.token = v.tokens[j];
    if (forced.empty() || !forced[j])
      r.sampler.add_logprobs(rows + int64_t(j) * n_vocab, n_vocab, s);
    if (!emit(item.id, r, s, settled + int64_t(j))) return;
    if (r.constrained) {
      if (!r.constrained->advance(s.token))
        return end(item.id, FinishReason::Error, "the constraint allows no token here");
      if (r.constrained->complete()) return end(item.id, FinishReason::Stop);
    }
  }
  const SeqInfo& after = *scheduler_.find(item.id);
  if (after.n_computed == int64_t(after.tokens.size()))
    scheduler_.append_token(item.id, v.tokens.back());
  else  // the rollback's block copy found no block: the lost positions are recomputed
    scheduler_.push_token(item.id, v.tokens.back());
  if (r.constrained) jump_forward(item.id, r, int64_t(after.tokens.size()));
}

bool EngineCore::emit(SeqId id, Request& r, const decode::SampleResult& s, int64_t n_before) {
  const auto now = Clock::now();
  if (r.output.output().empty()) {
    r.first_token = now;
    metrics_.time_to_first_token.observe(seconds(now - r.submitted));
  } else {
    metrics_.inter_token_latency.observe(seconds(now - r.last_token));
  }
  r.last_token = now;
  const bool context_full = n_before + 1 >= config_.scheduler.context_length;
  OutputProcessor::Update u = r.output.add(s, context_full);
  if (!u.event.tokens.empty()) metrics_.generated_tokens.fetch_add(1);
  if (u.finish) {
    end(id, std::move(u.event));
    return false;
  }
  r.stream->push(std::move(u.event));
  return true;
}

void EngineCore::end(SeqId id, FinishReason reason, std::string error) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return;
  end(id, it->second->output.finish(reason, std::move(error)));
}

void EngineCore::end(SeqId id, StreamEvent final_event) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  const FinishReason reason = final_event.finish_reason;
  final_event.model_steps = r.model_steps;
  metrics_.finished[size_t(reason)].fetch_add(1);
  if (reason == FinishReason::Deadline) metrics_.timed_out.fetch_add(1);
  metrics_.e2e_latency.observe(seconds(Clock::now() - r.submitted));
  const size_t n = r.output.output().size();
  if (n >= 2)
    metrics_.time_per_output_token.observe(seconds(r.last_token - r.first_token) / double(n - 1));
  if (spec_.enabled()) {
    final_event.speculative = true;
    final_event.spec_proposed = spec_.stats(id).proposed;
    final_event.spec_accepted = spec_.stats(id).accepted;
  }
  spec_.remove(id);
  scheduler_.finish(id);
  mixed_.erase(id);
  publish();
  status_.in_flight.fetch_sub(1);
  r.stream->push(std::move(final_event));
  requests_.erase(it);
}

void EngineCore::wait_for_requests() {
  // Idle under a shared KV budget: the memory beyond the guaranteed minimum goes back, for
  // another model's burst or a model added while serving (its cached prefixes go with it).
  if (config_.kv_budget) {
    const int64_t before = pool_.committed_blocks();
    const int64_t keep = int64_t(config_.kv_budget->min_bytes() / config_.kv_budget->block_bytes());
    const int64_t after = pool_.trim(keep);
    storage_.discard(kv::BlockId(after), kv::BlockId(before));
  }
  publish();
  std::unique_lock lock(inbox_.mu);
  inbox_.cv.wait(lock, [&] { return inbox_.stop || !inbox_.incoming.empty(); });
}

void EngineCore::wait_until_runnable(Clock::time_point now) {
  publish();
  auto wake = std::min(scheduler_.next_batch_deadline(), now + std::chrono::milliseconds(20));
  for (const auto& [id, r] : requests_)
    if (r->deadline) wake = std::min(wake, *r->deadline);
  std::unique_lock lock(inbox_.mu);
  inbox_.cv.wait_until(lock, wake, [&] { return inbox_.stop || !inbox_.incoming.empty(); });
}

void EngineCore::end_all_at_shutdown() {
  std::vector<SeqId> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  for (SeqId id : ids) end(id, FinishReason::Cancelled);
  std::lock_guard lock(inbox_.mu);
  for (auto& in : inbox_.incoming)
    in.stream->push(
        unscheduled_final_event(FinishReason::Cancelled, int64_t(in.req.prompt.size()), {}));
  status_.in_flight.fetch_sub(int64_t(inbox_.incoming.size()));
  inbox_.incoming.clear();
  publish();
}

void EngineCore::publish() {
  const kv::PoolStats ps = pool_.stats();
  status_.running.store(scheduler_.n_running());
  status_.waiting.store(scheduler_.n_waiting());
  status_.blocks_used.store(ps.blocks_in_use);
  status_.blocks_cached.store(ps.blocks_cached);
  status_.blocks_committed.store(pool_.committed_blocks());
  status_.prefix_queried.store(ps.prefix_queried_tokens);
  status_.prefix_hit.store(ps.prefix_hit_tokens);
  size_t copies = 0, state = 0;
  for (const auto& [id, m] : mixed_) {
    copies += m->f16_bytes();
    state += m->bytes();
  }
  status_.f16_copy_bytes.store(int64_t(copies));
  status_.mixed_bytes.store(int64_t(state));
  int64_t tokens = 0;
  for (const auto& [id, r] : requests_)
    if (const SeqInfo* seq = scheduler_.find(id); seq && seq->state == SeqState::Running)
      tokens += seq->n_computed;
  status_.tokens_used.store(tokens);
}

}  // namespace shrike::engine
