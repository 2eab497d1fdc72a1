// Which sequences run in the next step, and how many tokens each: the scheduler turns the state of
// the waiting and running sequences into a plain-data StepPlan. It owns the sequences' tokens and
// block tables (kv::BlockPool bookkeeping) but never touches a model, so it is unit-tested alone.
//
// Continuous batching (the default): every step has a token budget (max_batch_tokens). Running
// sequences come first, oldest first: a decoding sequence takes 1 token, a prefilling one the
// rest of its prompt up to what is left of the budget (chunked prefill). Then waiting sequences
// are admitted, first come first served, while the budget, max_seqs and the pool allow; admission
// looks the prompt up in the prefix cache and skips the blocks found there. When a running
// sequence needs a block and the pool has none, the most recently admitted running sequence is
// preempted: its blocks are released, and it goes back to the front of the waiting queue with
// its tokens so far (prompt + generated), to be recomputed when re-admitted (its own released
// blocks are often still in the prefix cache then).
//
// Static batching (the naive baseline): when no batch is running, one is formed from up to
// batch_size waiting sequences, once batch_size are waiting or the oldest has waited
// batch_wait_ms. Each member reserves blocks for its maximum length up front. The batch runs
// (whole prompts in one step, then one token per unfinished member per step) until its last
// member finishes; nothing joins it meanwhile.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/block_table.h"

namespace shrike::engine {

using SeqId = int64_t;
using Clock = std::chrono::steady_clock;

enum class BatchingMode { Continuous, Static };

struct SchedulerConfig {
  BatchingMode mode = BatchingMode::Continuous;
  int64_t max_batch_tokens = 1024;  // tokens computed per step (continuous)
  int64_t max_seqs = 64;            // sequences running at once
  int64_t max_queue = 1024;         // sequences waiting; add() refuses beyond
  int64_t context_length = 2048;    // positions per sequence
  bool prefix_caching = true;
  int64_t batch_size = 8;     // static
  double batch_wait_ms = 50;  // static
};

enum class SeqState { Waiting, Running };

// The scheduler's view of one sequence.
struct SeqInfo {
  SeqId id = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t prompt_len = 0;
  int64_t max_len = 0;          // prompt_len + max_tokens, at most context_length
  int64_t n_computed = 0;       // leading positions whose keys/values are in the cache
  int64_t n_cached_prompt = 0;  // prompt positions found in the prefix cache at first admission
  // Speculative decoding: the last n_draft tokens are drafts (add_draft), planned all together or
  // not at all, and never registered in the prefix cache (they may be rejected).
  int64_t n_draft = 0;
  kv::BlockTable table;  // position p lives in table.blocks()[p / block_size]
  Clock::time_point arrival{};
  SeqState state = SeqState::Waiting;
  int64_t preemptions = 0;
  bool admitted_once = false;
};

struct PlanItem {
  SeqId id = 0;
  int64_t pos0 = 0;      // first position computed (== n_computed before the step)
  int64_t n_tokens = 0;  // tokens[pos0 .. pos0 + n_tokens) are computed
  bool samples = false;  // pos0 + n_tokens == tokens.size(): the last logits choose a new token
  // Drafts among the tokens (the last n_draft): their rows and the row before them are verified,
  // so 1 + n_draft logit rows are wanted.
  int64_t n_draft = 0;
};

struct StepPlan {
  std::vector<PlanItem> items;
  std::vector<SeqId> preempted;  // preempted while planning this step (now waiting)
  // Sequences that cannot continue even with the whole pool to themselves (they need more blocks
  // than it has): the caller must finish() them (with an error). Their blocks are already
  // released and they are no longer planned; find() still shows them until finish().
  std::vector<SeqId> failed;
  int64_t total_tokens() const {
    int64_t n = 0;
    for (const auto& i : items) n += i.n_tokens;
    return n;
  }
  bool empty() const { return items.empty(); }
};

class Scheduler {
 public:
  // Throws std::invalid_argument for a non-positive limit.
  Scheduler(SchedulerConfig config, kv::BlockPool& pool);
  ~Scheduler();  // releases every block it holds

  const SchedulerConfig& config() const { return config_; }

  // Queues a new sequence. Returns false (and keeps nothing) when max_queue sequences are already
  // waiting. Requires 1 <= prompt.size() < context_length, max_tokens >= 1, and an unused id
  // (std::invalid_argument otherwise).
  bool add(SeqId id, std::vector<int32_t> prompt, int64_t max_tokens, Clock::time_point now);

  // Plans the next step (see the file comment). Allocates the blocks the planned tokens need.
  StepPlan schedule(Clock::time_point now);

  // After the model has run `plan`: advances n_computed of each item and registers newly full
  // blocks in the prefix cache.
  void commit(const StepPlan& plan);

  // Appends the token sampled for an item with samples == true (after commit). Unknown ids are
  // ignored; std::logic_error when the sequence has known tokens not yet computed.
  void append_token(SeqId id, int32_t token);
  // Jump-forward (constrained decoding): known tokens appended after the sampled one, computed
  // as one prefill chunk in the next step. Unknown ids are ignored; std::logic_error unless the
  // sequence is running.
  void append_forced(SeqId id, std::span<const int32_t> tokens);

  // Speculative decoding: appends draft tokens to a decoding sequence (its prompt computed, its
  // uncomputed tokens the last sampled one and any forced after it by append_forced; no drafts
  // yet). The next plan takes those tokens and all the drafts in one item, or drops the drafts
  // (budget or blocks short, preemption). Returns false (and adds nothing) when the sequence
  // cannot take them: not decoding, or past max_len.
  bool add_draft(SeqId id, std::span<const int32_t> draft);

  // Removes a sequence in any state (finished, cancelled, expired), releasing its blocks now.
  // Unknown ids are ignored.
  void finish(SeqId id);

  // Rollback (speculative decoding: rejected tokens discarded): a running sequence keeps only
  // its first n_tokens tokens (prompt_len <= n_tokens <= tokens.size(), std::invalid_argument
  // otherwise) and the cache of those it had computed; blocks past the end go back to the pool
  // (kv::BlockTable::truncate). When the returned Truncation needs_copy(), the caller copies
  // that block's memory (kv::KvStorage::copy_block) before the next step writes into it. If the
  // copy found no block the sequence recomputes the partly kept block's positions. When all kept
  // tokens were computed, the caller then append_token()s the one sampled after the last of them
  // (speculative decoding's bonus token); otherwise push_token() it.
  kv::Truncation truncate(SeqId id, int64_t n_tokens);
  // Appends a token after a truncate() that kept fewer computed positions than tokens (the copy
  // of a shared block found no free block): the lost positions are recomputed with it.
  void push_token(SeqId id, int32_t token);

  const SeqInfo* find(SeqId id) const;
  int64_t n_waiting() const { return int64_t(waiting_.size()); }
  int64_t n_running() const { return int64_t(running_.size()); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  const std::vector<SeqId>& running() const { return running_; }
  int64_t total_preemptions() const { return preemptions_; }
  // Static mode: when the waiting sequences will form a batch even if no more arrive (the engine
  // sleeps until then); Clock::time_point::max() when nothing waits or a batch is running.
  Clock::time_point next_batch_deadline() const;

 private:
  StepPlan schedule_continuous(Clock::time_point now);
  StepPlan schedule_static(Clock::time_point now);
  // Continuous batching's two halves: the running sequences' tokens (preempting when the pool
  // is short), then the admission of waiting ones; both spend the step's token budget.
  void plan_running(StepPlan& plan, int64_t& budget);
  void admit_waiting(StepPlan& plan, int64_t& budget);
  void release_blocks(SeqInfo& seq);
  static void drop_draft(SeqInfo& seq);
  void preempt(SeqInfo& seq, StepPlan& plan);
  // Takes a sequence that can never run out of the running/waiting lists, releases its blocks and
  // lists it in plan.failed; it stays findable until the caller finish()es it.
  void fail(SeqInfo& seq, StepPlan& plan);
  int64_t blocks_for(int64_t n_positions) const {
    return (n_positions + pool_.block_size() - 1) / pool_.block_size();
  }
  // Prefix caching applies to continuous batching only (static batching is the naive baseline).
  bool caching() const {
    return config_.prefix_caching && config_.mode == BatchingMode::Continuous;
  }
  SeqInfo& get(SeqId id) { return *seqs_.at(id); }

  SchedulerConfig config_;
  kv::BlockPool& pool_;
  std::unordered_map<SeqId, std::unique_ptr<SeqInfo>> seqs_;
  std::deque<SeqId> waiting_;   // front: next to admit
  std::vector<SeqId> running_;  // admission order, oldest first
  bool static_batch_active_ = false;
  int64_t preemptions_ = 0;
};

}  // namespace shrike::engine
