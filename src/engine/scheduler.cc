#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace shrike::engine {
namespace {

template <typename Container>
void erase_id(Container& c, SeqId id) {
  const auto it = std::find(c.begin(), c.end(), id);
  if (it != c.end()) c.erase(it);
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig config, kv::BlockPool& pool) : config_(config), pool_(pool) {
  const auto require = [](bool ok, const char* name, const std::string& value) {
    if (!ok) throw std::invalid_argument(std::string("scheduler: invalid ") + name + ": " + value);
  };
  require(config_.max_batch_tokens >= 1, "max_batch_tokens (need >= 1)",
          std::to_string(config_.max_batch_tokens));
  require(config_.max_seqs >= 1, "max_seqs (need >= 1)", std::to_string(config_.max_seqs));
  require(config_.max_queue >= 1, "max_queue (need >= 1)", std::to_string(config_.max_queue));
  // A prompt needs at least one position and the context one more for a generated token.
  require(config_.context_length >= 2, "context_length (need >= 2)",
          std::to_string(config_.context_length));
  require(config_.batch_size >= 1, "batch_size (need >= 1)", std::to_string(config_.batch_size));
  require(std::isfinite(config_.batch_wait_ms) && config_.batch_wait_ms >= 0,
          "batch_wait_ms (need a finite value >= 0)", std::to_string(config_.batch_wait_ms));
}

Scheduler::~Scheduler() {
  for (auto& entry : seqs_) release_blocks(*entry.second);
}

bool Scheduler::add(SeqId id, std::vector<int32_t> prompt, int64_t max_tokens,
                    Clock::time_point now) {
  const int64_t n = int64_t(prompt.size());
  if (n < 1 || n >= config_.context_length) {
    throw std::invalid_argument("scheduler: prompt of " + std::to_string(n) +
                                " tokens; need 1 to " + std::to_string(config_.context_length - 1));
  }
  if (max_tokens < 1) {
    throw std::invalid_argument("scheduler: max_tokens must be >= 1, got " +
                                std::to_string(max_tokens));
  }
  if (seqs_.count(id)) {
    throw std::invalid_argument("scheduler: sequence id " + std::to_string(id) + " is in use");
  }
  if (n_waiting() >= config_.max_queue) return false;
  auto seq = std::make_unique<SeqInfo>();
  seq->id = id;
  seq->prompt_len = n;
  // Written this way round so that a huge max_tokens cannot overflow.
  seq->max_len = max_tokens >= config_.context_length - n ? config_.context_length : n + max_tokens;
  seq->tokens = std::move(prompt);
  seq->arrival = now;
  waiting_.push_back(id);
  seqs_.emplace(id, std::move(seq));
  return true;
}

StepPlan Scheduler::schedule(Clock::time_point now) {
  return config_.mode == BatchingMode::Static ? schedule_static(now) : schedule_continuous(now);
}

StepPlan Scheduler::schedule_continuous(Clock::time_point /*now*/) {
  StepPlan plan;
  int64_t budget = config_.max_batch_tokens;
  plan_running(plan, budget);
  // Drafts of sequences the budget did not reach are dropped: they are planned with their
  // sampled token or not at all.
  for (SeqId id : running_) {
    SeqInfo& seq = get(id);
    if (seq.n_draft > 0 && std::none_of(plan.items.begin(), plan.items.end(),
                                        [&](const PlanItem& item) { return item.id == id; }))
      drop_draft(seq);
  }
  // Admission, first come first served. Not in a step that preempted: the pool is short, and
  // the sequence just preempted would be re-admitted at once.
  if (plan.preempted.empty()) admit_waiting(plan, budget);
  return plan;
}

void Scheduler::plan_running(StepPlan& plan, int64_t& budget) {
  const int64_t bs = pool_.block_size();
  // Running sequences, oldest first. In practice every running sequence but the newest is
  // decoding (a partial prefill chunk uses up the budget or the pool, so nothing is admitted
  // after it), so this order also puts decode tokens before prefill chunks.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    SeqInfo& seq = get(running_[i]);
    const int64_t known = int64_t(seq.tokens.size());
    const int64_t remaining = known - seq.n_computed;
    if (known > seq.max_len) {  // the caller appended past max_tokens: never exceed the context
      fail(seq, plan);
      continue;
    }
    if (remaining <= 0) {  // waiting for append_token
      ++i;
      continue;
    }
    if (blocks_for(seq.n_computed + 1) > pool_.total_blocks()) {  // even the whole pool is short
      fail(seq, plan);
      continue;
    }
    // Drafts go all together or not at all (their rows are verified together), and never take
    // blocks that would need a preemption.
    if (seq.n_draft > 0 && (remaining > budget || blocks_for(known) - int64_t(seq.table.size()) >
                                                      pool_.available_blocks())) {
      drop_draft(seq);
      continue;  // looked at again with its one token
    }
    // A prefill chunk shrinks to what the pool can hold rather than preempting anyone; only a
    // sequence that cannot take a single token preempts, newest first (possibly itself).
    int64_t n = 0;
    bool self_preempted = false;
    for (;;) {
      const int64_t coverable =
          (int64_t(seq.table.size()) + pool_.available_blocks()) * bs - seq.n_computed;
      n = std::min({remaining, budget, coverable});
      if (n >= 1) break;
      const SeqId victim = running_.back();
      preempt(get(victim), plan);
      budget = config_.max_batch_tokens - plan.total_tokens();
      if (victim == seq.id) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // it was the newest running sequence: none left after it
    if (!seq.table.ensure(pool_, seq.n_computed + n)) {
      throw std::logic_error("scheduler: pool refused blocks it reported available");
    }
    plan.items.push_back(
        {seq.id, seq.n_computed, n, seq.n_computed + n == known, n == remaining ? seq.n_draft : 0});
    budget -= n;
    ++i;
  }
}

void Scheduler::admit_waiting(StepPlan& plan, int64_t& budget) {
  while (!waiting_.empty() && n_running() < config_.max_seqs && budget > 0) {
    SeqInfo& seq = get(waiting_.front());
    const int64_t known = int64_t(seq.tokens.size());
    if (blocks_for(known) > pool_.total_blocks()) {
      fail(seq, plan);
      continue;
    }
    if (caching())  // reuses cached full blocks of its tokens
      seq.n_computed = seq.table.attach_cached_prefix(pool_, seq.tokens.data(), known);
    const int64_t n = std::min(known - seq.n_computed, budget);
    const int64_t needed = blocks_for(seq.n_computed + n) - int64_t(seq.table.size());
    if (needed > pool_.available_blocks()) {
      release_blocks(seq);  // gives the prefix blocks back; it stays first in the queue
      break;
    }
    if (!seq.table.ensure(pool_, seq.n_computed + n)) {
      throw std::logic_error("scheduler: pool refused blocks it reported available");
    }
    if (caching()) pool_.count_lookup(known, seq.n_computed);
    if (!seq.admitted_once) {
      seq.n_cached_prompt = std::min(seq.n_computed, seq.prompt_len);
      seq.admitted_once = true;
    }
    seq.state = SeqState::Running;
    waiting_.pop_front();
    running_.push_back(seq.id);
    plan.items.push_back({seq.id, seq.n_computed, n, seq.n_computed + n == known});
    budget -= n;
  }
}

StepPlan Scheduler::schedule_static(Clock::time_point now) {
  StepPlan plan;
  if (!static_batch_active_) {
    if (waiting_.empty() || now < next_batch_deadline()) return plan;
    const int64_t cap = std::min(config_.batch_size, config_.max_seqs);
    while (!waiting_.empty() && n_running() < cap) {
      SeqInfo& seq = get(waiting_.front());
      const int64_t reserve = blocks_for(seq.max_len);
      if (reserve > pool_.total_blocks()) {
        fail(seq, plan);
        continue;
      }
      if (reserve > pool_.available_blocks()) break;  // the batch runs with fewer members
      if (!seq.table.ensure(pool_, seq.max_len)) {
        throw std::logic_error("scheduler: pool refused blocks it reported available");
      }
      seq.admitted_once = true;
      seq.state = SeqState::Running;
      waiting_.pop_front();
      running_.push_back(seq.id);
    }
    static_batch_active_ = !running_.empty();
  }
  // Every member computes all its known tokens not yet computed: the whole prompt in the batch's
  // first step, then the token sampled in the previous step.
  for (size_t i = 0; i < running_.size();) {
    SeqInfo& seq = get(running_[i]);
    const int64_t known = int64_t(seq.tokens.size());
    if (known > seq.max_len) {
      fail(seq, plan);
      continue;
    }
    if (known > seq.n_computed) {  // drafts (if any) are within max_len: add_draft checked
      plan.items.push_back({seq.id, seq.n_computed, known - seq.n_computed, true, seq.n_draft});
    }
    ++i;
  }
  return plan;
}

void Scheduler::commit(const StepPlan& plan) {
  for (const PlanItem& item : plan.items) {
    const auto it = seqs_.find(item.id);
    if (it == seqs_.end()) continue;  // finished since it was planned
    SeqInfo& seq = *it->second;
    const int64_t end = item.pos0 + item.n_tokens;
    if (seq.state != SeqState::Running || item.pos0 != seq.n_computed || item.n_tokens < 1 ||
        end > int64_t(seq.tokens.size()) || blocks_for(end) > int64_t(seq.table.size())) {
      throw std::logic_error("scheduler: plan item for sequence " + std::to_string(item.id) +
                             " does not match its state (committed twice?)");
    }
    seq.n_computed = end;
    // Drafts stay out of the prefix cache until accepted (a rejected position's content must
    // never be found there).
    const int64_t settled = std::min(seq.n_computed, int64_t(seq.tokens.size()) - seq.n_draft);
    if (caching()) seq.table.register_full_blocks(pool_, seq.tokens.data(), settled);
  }
}

void Scheduler::append_token(SeqId id, int32_t token) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  SeqInfo& seq = *it->second;
  if (seq.state != SeqState::Running || seq.n_computed != int64_t(seq.tokens.size())) {
    throw std::logic_error("scheduler: sequence " + std::to_string(id) +
                           " was not expecting a sampled token");
  }
  seq.tokens.push_back(token);
}

void Scheduler::append_forced(SeqId id, std::span<const int32_t> tokens) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  SeqInfo& seq = *it->second;
  if (seq.state != SeqState::Running)
    throw std::logic_error("scheduler: sequence " + std::to_string(id) + " is not running");
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
}

bool Scheduler::add_draft(SeqId id, std::span<const int32_t> draft) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end() || draft.empty()) return false;
  SeqInfo& seq = *it->second;
  const int64_t known = int64_t(seq.tokens.size());
  if (seq.state != SeqState::Running || seq.n_draft != 0 || seq.n_computed >= known ||
      seq.n_computed < seq.prompt_len || known + int64_t(draft.size()) > seq.max_len)
    return false;
  seq.tokens.insert(seq.tokens.end(), draft.begin(), draft.end());
  seq.n_draft = int64_t(draft.size());
  return true;
}

void Scheduler::drop_draft(SeqInfo& seq) {
  seq.tokens.resize(seq.tokens.size() - size_t(seq.n_draft));
  seq.n_draft = 0;
}

void Scheduler::push_token(SeqId id, int32_t token) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  if (it->second->state != SeqState::Running || it->second->n_draft != 0)
    throw std::logic_error("scheduler: push_token on a sequence that is not running");
  it->second->tokens.push_back(token);
}

void Scheduler::finish(SeqId id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  release_blocks(*it->second);
  erase_id(waiting_, id);
  erase_id(running_, id);
  seqs_.erase(it);
  if (running_.empty()) static_batch_active_ = false;
}

kv::Truncation Scheduler::truncate(SeqId id, int64_t n_tokens) {
  SeqInfo& seq = get(id);
  if (seq.state != SeqState::Running || n_tokens < seq.prompt_len ||
      n_tokens > int64_t(seq.tokens.size()))
    throw std::invalid_argument("scheduler: cannot truncate sequence " + std::to_string(id) +
                                " to " + std::to_string(n_tokens) + " tokens");
  seq.tokens.resize(size_t(n_tokens));
  seq.n_draft = 0;                             // what is kept is accepted
  if (config_.mode == BatchingMode::Static) {  // blocks stay reserved for max_len, never shared
    seq.n_computed = std::min(seq.n_computed, n_tokens);
    return {seq.n_computed};
  }
  const kv::Truncation t = seq.table.truncate(pool_, std::min(seq.n_computed, n_tokens));
  seq.n_computed = t.kept;
  return t;
}

const SeqInfo* Scheduler::find(SeqId id) const {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

Clock::time_point Scheduler::next_batch_deadline() const {
  if (config_.mode != BatchingMode::Static || static_batch_active_ || waiting_.empty()) {
    return Clock::time_point::max();
  }
  const Clock::time_point oldest = seqs_.at(waiting_.front())->arrival;
  // A full batch is due at once: the oldest arrival is in the past.
  if (n_waiting() >= std::min(config_.batch_size, config_.max_seqs)) return oldest;
  const std::chrono::duration<double, std::milli> wait(config_.batch_wait_ms);
  // A wait too long to represent means "only a full batch starts".
  if (wait >= Clock::time_point::max() - oldest) return Clock::time_point::max();
  return oldest + std::chrono::duration_cast<Clock::duration>(wait);
}

void Scheduler::release_blocks(SeqInfo& seq) {
  seq.table.release(pool_);
  seq.n_computed = 0;
}

void Scheduler::preempt(SeqInfo& seq, StepPlan& plan) {
  drop_draft(seq);
  release_blocks(seq);
  erase_id(running_, seq.id);
  seq.state = SeqState::Waiting;
  ++seq.preemptions;
  ++preemptions_;
  waiting_.push_front(seq.id);
  plan.preempted.push_back(seq.id);
  std::erase_if(plan.items, [&](const PlanItem& item) { return item.id == seq.id; });
}

void Scheduler::fail(SeqInfo& seq, StepPlan& plan) {
  drop_draft(seq);
  release_blocks(seq);
  erase_id(waiting_, seq.id);
  erase_id(running_, seq.id);
  seq.state = SeqState::Waiting;
  plan.failed.push_back(seq.id);
  std::erase_if(plan.items, [&](const PlanItem& item) { return item.id == seq.id; });
  if (running_.empty()) static_batch_active_ = false;
}

}  // namespace shrike::engine
