#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

namespace shrike::engine {
namespace {

using std::chrono::milliseconds;

std::vector<int32_t> range(int32_t first, int64_t n) {
  std::vector<int32_t> v(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = first + int32_t(i);
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The engine loop without a model: schedule, check the plan, "compute" it, commit, sample. The fake
// KV memory records which token each slot holds; before computing an item, every earlier position
// must read back the sequence's own token through its block table, so a wrong block table, a
// block shared while written, or a bad prefix-cache hit all show up as a wrong token.
class FakeEngine {
 public:
  FakeEngine(SchedulerConfig config, int64_t n_blocks, int64_t block_size)
      : pool(n_blocks, block_size),
        sched(config, pool),
        context_length_(config.context_length),
        slots_(size_t(n_blocks * block_size), -1) {}

  bool add(SeqId id, std::vector<int32_t> prompt, int64_t max_tokens) {
    const std::vector<int32_t> copy = prompt;
    if (!sched.add(id, std::move(prompt), max_tokens, now)) return false;
    prompts[id] = copy;
    outputs[id] = {};
    // The engine caps max_tokens so that prompt and output fit the context.
    max_tokens_[id] = std::min(max_tokens, context_length_ - int64_t(copy.size()));
    return true;
  }

  // The token "sampled" for the k-th output of a sequence: independent of the schedule, so
  // preemption must not change any output.
  static int32_t sampled(SeqId id, size_t k) { return int32_t(50000 + 1000 * id + int64_t(k)); }
  static std::vector<int32_t> expected_output(SeqId id, int64_t n) {
    std::vector<int32_t> v;
    for (int64_t k = 0; k < n; ++k) v.push_back(sampled(id, size_t(k)));
    return v;
  }

  StepPlan step() {
    StepPlan plan = sched.schedule(now);
    ++steps;
    for (const SeqId id : plan.failed) {
      sched.finish(id);
      failed.push_back(id);
      finished_.insert(id);
    }
    check_plan(plan);
    for (const PlanItem& item : plan.items) compute(item);
    sched.commit(plan);
    for (const PlanItem& item : plan.items) {
      if (!item.samples) continue;
      auto& out = outputs[item.id];
      const int32_t token = sampled(item.id, out.size());
      out.push_back(token);
      if (int64_t(out.size()) >= max_tokens_[item.id]) {
        sched.finish(item.id);
        finished_.insert(item.id);
        finish_order.push_back(item.id);
      } else {
        sched.append_token(item.id, token);
      }
    }
    check_tokens_preserved();
    return plan;
  }

  // Speculative rollback: the sequence keeps n_tokens tokens, all computed, and gets the token
  // sampled after the last of them (speculative decoding's bonus token); a block copy the
  // scheduler asks for is done on the fake memory, as the engine does on the KV storage.
  kv::Truncation rollback(SeqId id, int64_t n_tokens) {
    const kv::Truncation t = sched.truncate(id, n_tokens);
    if (t.needs_copy()) {
      const int64_t bs = pool.block_size();
      std::copy_n(slots_.begin() + t.copy_src * bs, bs, slots_.begin() + t.copy_dst * bs);
    }
    auto& out = outputs[id];
    out.resize(size_t(n_tokens - int64_t(prompts[id].size())));
    out.push_back(sampled(id, out.size()));
    sched.append_token(id, out.back());
    return t;
  }

  // Steps until the scheduler is idle; every StepPlan is kept in `plans`.
  void run(int max_steps = 100000) {
    for (int i = 0; i < max_steps && !sched.idle(); ++i) plans.push_back(step());
    ASSERT_TRUE(sched.idle()) << "did not finish in " << max_steps << " steps";
  }

  kv::BlockPool pool;
  Scheduler sched;
  Clock::time_point now{};
  int steps = 0;
  std::map<SeqId, std::vector<int32_t>> prompts, outputs;
  std::vector<SeqId> finish_order, failed;
  std::vector<StepPlan> plans;

 private:
  int64_t slot_of(const SeqInfo& s, int64_t p) const {
    const int64_t bs = pool.block_size();
    EXPECT_LT(p / bs, int64_t(s.table.blocks().size())) << "position " << p << " has no block";
    return int64_t(s.table.blocks()[size_t(p / bs)]) * bs + p % bs;
  }

  void check_plan(const StepPlan& plan) {
    std::set<SeqId> seen;
    for (const PlanItem& item : plan.items) {
      EXPECT_TRUE(seen.insert(item.id).second) << "sequence " << item.id << " planned twice";
      EXPECT_EQ(std::count(plan.preempted.begin(), plan.preempted.end(), item.id), 0);
      EXPECT_EQ(std::count(plan.failed.begin(), plan.failed.end(), item.id), 0);
      const SeqInfo* s = sched.find(item.id);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->state, SeqState::Running);
      EXPECT_EQ(item.pos0, s->n_computed);
      EXPECT_GE(item.n_tokens, 1);
      EXPECT_LE(item.pos0 + item.n_tokens, int64_t(s->tokens.size()));
      EXPECT_LT(item.pos0 + item.n_tokens, context_length_ + 1);
      EXPECT_EQ(item.samples, item.pos0 + item.n_tokens == int64_t(s->tokens.size()));
    }
    for (const SeqId id : plan.preempted) {
      const SeqInfo* s = sched.find(id);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->state, SeqState::Waiting);
      EXPECT_TRUE(s->table.blocks().empty());
      EXPECT_EQ(s->n_computed, 0);
    }
  }

  void compute(const PlanItem& item) {
    const SeqInfo& s = *sched.find(item.id);
    for (int64_t p = 0; p < item.pos0; ++p) {
      ASSERT_EQ(slots_[size_t(slot_of(s, p))], s.tokens[size_t(p)])
          << "sequence " << item.id << " reads a wrong key at position " << p;
    }
    for (int64_t p = item.pos0; p < item.pos0 + item.n_tokens; ++p) {
      const kv::BlockId b = s.table.blocks()[size_t(p / pool.block_size())];
      ASSERT_EQ(pool.refcount(b), 1) << "sequence " << item.id << " writes a shared block";
      slots_[size_t(slot_of(s, p))] = s.tokens[size_t(p)];
    }
  }

  void check_tokens_preserved() {
    for (const auto& [id, prompt] : prompts) {
      if (finished_.count(id)) {
        EXPECT_EQ(sched.find(id), nullptr);
        continue;
      }
      const SeqInfo* s = sched.find(id);
      ASSERT_NE(s, nullptr) << id;
      EXPECT_EQ(s->tokens, concat(prompt, outputs[id])) << "sequence " << id;
    }
  }

  int64_t context_length_;
  std::vector<int32_t> slots_;
  std::map<SeqId, int64_t> max_tokens_;
  std::set<SeqId> finished_;
};

SchedulerConfig continuous(int64_t max_batch_tokens, int64_t max_seqs = 64) {
  SchedulerConfig c;
  c.max_batch_tokens = max_batch_tokens;
  c.max_seqs = max_seqs;
  return c;
}

TEST(Scheduler, RejectsBadConfigurationsAndRequests) {
  kv::BlockPool pool(8, 4);
  for (auto bad :
       {&SchedulerConfig::max_batch_tokens, &SchedulerConfig::max_seqs, &SchedulerConfig::max_queue,
        &SchedulerConfig::context_length, &SchedulerConfig::batch_size}) {
    SchedulerConfig c;
    c.*bad = 0;
    EXPECT_THROW(Scheduler(c, pool), std::invalid_argument);
  }
  SchedulerConfig c;
  c.batch_wait_ms = -1;
  EXPECT_THROW(Scheduler(c, pool), std::invalid_argument);

  c = SchedulerConfig{};
  c.context_length = 16;
  Scheduler s(c, pool);
  const Clock::time_point t{};
  EXPECT_THROW(s.add(1, {}, 4, t), std::invalid_argument);
  EXPECT_THROW(s.add(1, range(0, 16), 4, t), std::invalid_argument);  // no room to generate
  EXPECT_THROW(s.add(1, range(0, 4), 0, t), std::invalid_argument);
  EXPECT_TRUE(s.add(1, range(0, 15), INT64_MAX, t));
  EXPECT_EQ(s.find(1)->max_len, 16);
  EXPECT_THROW(s.add(1, range(0, 4), 4, t), std::invalid_argument);  // id in use
  EXPECT_EQ(s.n_waiting(), 1);
  s.finish(1);
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.next_batch_deadline(), Clock::time_point::max());  // continuous: never waits
}

TEST(Scheduler, TokenBudgetIsRespectedAndUsed) {
  FakeEngine e(continuous(64), 256, 16);
  const std::vector<int64_t> prompt_lens = {100, 5, 70, 33, 1, 64, 129, 17};
  for (size_t i = 0; i < prompt_lens.size(); ++i) {
    ASSERT_TRUE(e.add(SeqId(i), range(int32_t(i * 1000), prompt_lens[i]), 10));
  }
  e.run();
  bool full = false;
  for (const StepPlan& p : e.plans) {
    EXPECT_LE(p.total_tokens(), 64);
    full = full || p.total_tokens() == 64;
  }
  EXPECT_TRUE(full);
  EXPECT_EQ(e.finish_order.size(), prompt_lens.size());
  for (size_t i = 0; i < prompt_lens.size(); ++i) {
    EXPECT_EQ(e.outputs[SeqId(i)], FakeEngine::expected_output(SeqId(i), 10));
  }
  EXPECT_EQ(e.sched.total_preemptions(), 0);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, LongPromptIsPrefilledInChunksAndSamplesOnlyAtTheEnd) {
  FakeEngine e(continuous(64), 64, 16);
  ASSERT_TRUE(e.add(1, range(0, 200), 3));
  e.run();
  struct Want {
    int64_t pos0, n;
    bool samples;
  };
  const std::vector<Want> want = {{0, 64, false}, {64, 64, false}, {128, 64, false},
                                  {192, 8, true}, {200, 1, true},  {201, 1, true}};
  ASSERT_EQ(e.plans.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(e.plans[i].items.size(), 1u);
    EXPECT_EQ(e.plans[i].items[0].pos0, want[i].pos0) << i;
    EXPECT_EQ(e.plans[i].items[0].n_tokens, want[i].n) << i;
    EXPECT_EQ(e.plans[i].items[0].samples, want[i].samples) << i;
  }
  EXPECT_EQ(e.outputs[1].size(), 3u);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, BlocksAreAllocatedOnlyAsPositionsNeedThem) {
  FakeEngine e(continuous(64), 64, 16);
  ASSERT_TRUE(e.add(1, range(0, 20), 30));
  e.step();
  EXPECT_EQ(e.sched.find(1)->table.blocks().size(), 2u);  // positions 0..19
  for (int i = 0; i < 12; ++i) e.step();                  // positions up to 31
  EXPECT_EQ(e.sched.find(1)->table.blocks().size(), 2u);
  EXPECT_EQ(e.sched.find(1)->table.hashes().size(), 2u);  // both full: registered
  e.step();                                               // position 32
  EXPECT_EQ(e.sched.find(1)->table.blocks().size(), 3u);
  EXPECT_EQ(e.pool.blocks_in_use(), 3);
  e.run();
  EXPECT_EQ(e.outputs[1].size(), 30u);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, TruncateRollsBackTokensAndReleasesBlocks) {
  FakeEngine e(continuous(64), 64, 16);
  ASSERT_TRUE(e.add(1, range(0, 20), 40));
  while (e.sched.find(1)->tokens.size() < 36) e.step();  // 35 positions computed: 3 blocks
  ASSERT_EQ(e.pool.blocks_in_use(), 3);
  EXPECT_THROW(e.sched.truncate(1, 19), std::invalid_argument);  // into the prompt
  const kv::Truncation t = e.rollback(1, 22);
  EXPECT_EQ(t.kept, 22);
  EXPECT_FALSE(t.needs_copy());
  const SeqInfo* s = e.sched.find(1);
  EXPECT_EQ(s->tokens.size(), 23u);  // with the bonus token
  EXPECT_EQ(s->n_computed, 22);
  EXPECT_EQ(s->table.size(), 2u);
  EXPECT_EQ(s->table.hashes().size(), 1u);  // block 1 is partial again
  EXPECT_EQ(e.pool.blocks_in_use(), 2);
  e.run();  // the same tokens are generated again, read back through the table
  EXPECT_EQ(e.outputs[1], FakeEngine::expected_output(1, 40));
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, TruncateIntoABlockAnotherSequenceSharesCopiesIt) {
  FakeEngine e(continuous(64), 64, 16);
  ASSERT_TRUE(e.add(1, range(0, 20), 40));
  while (e.sched.find(1)->tokens.size() < 36) e.step();
  // Sequence 2's prompt continues sequence 1's text: it shares blocks 0 and 1 (positions 0..31).
  const std::vector<int32_t> tokens = e.sched.find(1)->tokens;
  ASSERT_TRUE(e.add(2, std::vector<int32_t>(tokens.begin(), tokens.begin() + 33), 5));
  e.step();
  const kv::BlockId shared = e.sched.find(1)->table.blocks()[1];
  ASSERT_EQ(e.pool.refcount(shared), 2);
  const kv::Truncation t = e.rollback(1, 25);
  ASSERT_TRUE(t.needs_copy());
  EXPECT_EQ(t.copy_src, shared);
  EXPECT_EQ(e.pool.refcount(shared), 1);
  EXPECT_EQ(e.sched.find(2)->table.blocks()[1], shared);
  e.run();  // neither sequence reads a position the other overwrote
  EXPECT_EQ(e.outputs[1], FakeEngine::expected_output(1, 40));
  EXPECT_EQ(e.outputs[2], FakeEngine::expected_output(2, 5));
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

// Speculative drafts: planned with the sampled token they follow (one verified item), never
// registered in the prefix cache, dropped whole when the budget cannot take them.
TEST(Scheduler, DraftsArePlannedWholeAndKeptOutOfThePrefixCache) {
  FakeEngine e(continuous(64), 64, 16);
  ASSERT_TRUE(e.add(1, range(0, 14), 40));
  e.step();  // the prompt; the first output token is now pending
  const std::vector<int32_t> draft{7, 8, 9, 10};
  EXPECT_FALSE(e.sched.add_draft(2, draft));  // unknown
  ASSERT_TRUE(e.sched.add_draft(1, draft));
  EXPECT_FALSE(e.sched.add_draft(1, draft));  // already has drafts
  StepPlan plan = e.sched.schedule(e.now);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].n_tokens, 5);
  EXPECT_EQ(plan.items[0].n_draft, 4);
  EXPECT_TRUE(plan.items[0].samples);
  e.sched.commit(plan);
  const SeqInfo* s = e.sched.find(1);
  EXPECT_EQ(s->n_computed, 19);
  EXPECT_EQ(s->table.hashes().size(), 0u);  // block 0 is full, but of drafts in part
  // One draft accepted: 16 positions kept, block 0 now settled and registered at the next commit.
  e.sched.truncate(1, 16);
  EXPECT_EQ(s->n_draft, 0);
  EXPECT_EQ(s->n_computed, 16);
  e.sched.append_token(1, 11);
  plan = e.sched.schedule(e.now);
  e.sched.commit(plan);
  EXPECT_EQ(s->table.hashes().size(), 1u);
  e.sched.append_token(1, 12);

  // A budget too small for the drafts: they are dropped, the sampled token alone is planned.
  FakeEngine small(continuous(3), 64, 16);
  ASSERT_TRUE(small.add(1, range(0, 3), 40));
  small.step();
  ASSERT_TRUE(small.sched.add_draft(1, draft));
  plan = small.sched.schedule(small.now);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].n_tokens, 1);
  EXPECT_EQ(plan.items[0].n_draft, 0);
  EXPECT_EQ(small.sched.find(1)->tokens.size(), 4u);
  // Past max_len: refused.
  FakeEngine tight(continuous(64), 64, 16);
  ASSERT_TRUE(tight.add(1, range(0, 3), 2));
  tight.step();
  EXPECT_FALSE(tight.sched.add_draft(1, draft));
  EXPECT_TRUE(tight.sched.add_draft(1, std::vector<int32_t>{5}));

  // After jump-forward's known tokens (constrained decoding): the sampled token, the forced ones
  // and the drafts are one item whose last 1 + n_draft rows are verified.
  FakeEngine forced(continuous(64), 64, 16);
  ASSERT_TRUE(forced.add(1, range(0, 5), 40));
  EXPECT_FALSE(forced.sched.add_draft(1, draft));  // the prompt is not computed yet
  forced.step();
  forced.sched.append_forced(1, std::vector<int32_t>{20, 21, 22});
  ASSERT_TRUE(forced.sched.add_draft(1, draft));
  plan = forced.sched.schedule(forced.now);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].pos0, 5);
  EXPECT_EQ(plan.items[0].n_tokens, 8);
  EXPECT_EQ(plan.items[0].n_draft, 4);
  EXPECT_TRUE(plan.items[0].samples);
}

TEST(Scheduler, MaxSeqsIsRespected) {
  FakeEngine e(continuous(1024, 3), 256, 16);
  for (SeqId id = 0; id < 7; ++id) ASSERT_TRUE(e.add(id, range(int32_t(id * 100), 9), 5 + id));
  bool reached = false;
  while (!e.sched.idle()) {
    const StepPlan p = e.step();
    EXPECT_LE(p.items.size(), 3u);
    EXPECT_LE(e.sched.n_running(), 3);
    reached = reached || p.items.size() == 3u;
    ASSERT_LT(e.steps, 1000);
  }
  EXPECT_TRUE(reached);
  EXPECT_EQ(e.finish_order.size(), 7u);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, AdmissionIsFirstComeFirstServed) {
  // One sequence at a time: a short prompt never overtakes a long one that arrived earlier.
  FakeEngine e(continuous(8, 1), 64, 4);
  const std::vector<SeqId> ids = {7, 3, 9, 1};
  const std::vector<int64_t> lens = {30, 2, 17, 1};
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_TRUE(e.add(ids[i], range(0, lens[i]), 2));
  e.run();
  EXPECT_EQ(e.finish_order, ids);

  // Several at a time: the first step's items are in arrival order, and a sequence is first
  // planned no earlier than every sequence that arrived before it.
  FakeEngine f(continuous(10, 8), 64, 4);
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_TRUE(f.add(ids[i], range(0, 4 + lens[i]), 3));
  f.run();
  std::map<SeqId, size_t> first_step;
  for (size_t s = 0; s < f.plans.size(); ++s) {
    for (const PlanItem& item : f.plans[s].items) first_step.emplace(item.id, s);
  }
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_LE(first_step[ids[i - 1]], first_step[ids[i]]);
  EXPECT_EQ(f.plans[0].items[0].id, 7);
  EXPECT_EQ(f.plans[0].items[0].n_tokens, 10);  // the whole budget: 3 waits
  EXPECT_EQ(f.pool.blocks_in_use(), 0);
}

TEST(Scheduler, FullQueueRefusesNewSequences) {
  SchedulerConfig c = continuous(1024);
  c.max_queue = 2;
  FakeEngine e(c, 64, 16);
  EXPECT_TRUE(e.add(1, range(0, 5), 2));
  EXPECT_TRUE(e.add(2, range(0, 5), 2));
  EXPECT_FALSE(e.add(3, range(0, 5), 2));
  EXPECT_EQ(e.sched.find(3), nullptr);
  EXPECT_EQ(e.sched.n_waiting(), 2);
  e.step();  // both admitted: the queue has room again
  EXPECT_EQ(e.sched.n_waiting(), 0);
  EXPECT_EQ(e.sched.n_running(), 2);
  EXPECT_TRUE(e.add(3, range(0, 5), 2));
  e.run();
  EXPECT_EQ(e.finish_order.size(), 3u);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, SharedPrefixIsTakenFromTheCache) {
  FakeEngine e(continuous(1024), 64, 16);
  const std::vector<int32_t> prefix = range(1000, 256);
  ASSERT_TRUE(e.add(1, concat(prefix, {1, 2, 3}), 2));
  e.step();
  const std::vector<kv::BlockId> a_blocks(e.sched.find(1)->table.blocks().begin(),
                                          e.sched.find(1)->table.blocks().begin() + 16);
  EXPECT_EQ(e.sched.find(1)->n_cached_prompt, 0);
  e.run();
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
  EXPECT_EQ(e.pool.stats().blocks_cached, 16);  // the full blocks of sequence 1
  EXPECT_EQ(e.pool.stats().prefix_hit_tokens, 0);

  // Sequence 2 arrives after 1 has finished: its 16 prefix blocks are still cached.
  ASSERT_TRUE(e.add(2, concat(prefix, {7, 8, 9, 10}), 3));
  StepPlan p = e.step();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].pos0, 256);
  EXPECT_EQ(p.items[0].n_tokens, 4);
  const SeqInfo* b = e.sched.find(2);
  EXPECT_EQ(b->n_cached_prompt, 256);
  EXPECT_EQ(std::vector<kv::BlockId>(b->table.blocks().begin(), b->table.blocks().begin() + 16),
            a_blocks);
  EXPECT_GE(e.pool.stats().prefix_hit_tokens, 256);
  EXPECT_EQ(e.pool.stats().prefix_queried_tokens, 259 + 260);

  // Sequence 3 arrives while 2 runs: the blocks are shared, not copied.
  ASSERT_TRUE(e.add(3, concat(prefix, {4}), 2));
  p = e.step();
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[1].id, 3);
  EXPECT_EQ(p.items[1].pos0, 256);
  EXPECT_EQ(e.sched.find(3)->n_cached_prompt, 256);
  EXPECT_EQ(e.pool.refcount(a_blocks[0]), 2);
  EXPECT_EQ(e.pool.refcount(a_blocks[15]), 2);
  EXPECT_EQ(e.pool.stats().prefix_hit_tokens, 512);
  e.run();
  EXPECT_EQ(e.outputs[2], FakeEngine::expected_output(2, 3));
  EXPECT_EQ(e.pool.blocks_in_use(), 0);

  // A different first block shares nothing, even with the rest equal.
  std::vector<int32_t> other = concat(prefix, {1});
  other[0] = 5;
  ASSERT_TRUE(e.add(4, other, 1));
  p = e.step();
  EXPECT_EQ(p.items[0].pos0, 0);
  EXPECT_EQ(p.items[0].n_tokens, 257);
  e.run();
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, TheBlockOfTheLastTokenIsNeverTakenFromTheCache) {
  FakeEngine e(continuous(1024), 64, 16);
  const std::vector<int32_t> prompt = range(0, 32);
  ASSERT_TRUE(e.add(1, prompt, 1));
  e.run();
  EXPECT_EQ(e.pool.stats().blocks_cached, 2);  // both blocks of sequence 1 are full

  ASSERT_TRUE(e.add(2, prompt, 1));
  StepPlan p = e.step();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].pos0, 16);  // one block attached, not two
  EXPECT_EQ(p.items[0].n_tokens, 16);
  EXPECT_TRUE(p.items[0].samples);
  EXPECT_EQ(e.pool.stats().prefix_hit_tokens, 16);
  EXPECT_EQ(e.sched.idle(), true);  // finished after one token

  // One more token: now both blocks can be taken.
  ASSERT_TRUE(e.add(3, concat(prompt, {99}), 1));
  p = e.step();
  EXPECT_EQ(p.items[0].pos0, 32);
  EXPECT_EQ(p.items[0].n_tokens, 1);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, PrefixCachingCanBeTurnedOff) {
  SchedulerConfig c = continuous(1024);
  c.prefix_caching = false;
  FakeEngine e(c, 64, 16);
  const std::vector<int32_t> prompt = range(0, 100);
  ASSERT_TRUE(e.add(1, prompt, 2));
  e.run();
  ASSERT_TRUE(e.add(2, prompt, 2));
  const StepPlan p = e.step();
  EXPECT_EQ(p.items[0].pos0, 0);
  EXPECT_EQ(e.pool.stats().prefix_queried_tokens, 0);
  EXPECT_EQ(e.pool.stats().blocks_cached, 0);
  e.run();
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, PreemptionUnderPressureLosesNoTokens) {
  // 4 sequences that each grow to 15 blocks share a pool of 24.
  FakeEngine e(continuous(64), 24, 4);
  for (SeqId id = 1; id <= 4; ++id) ASSERT_TRUE(e.add(id, range(int32_t(id * 100), 20), 40));
  int64_t max_in_use = 0;
  while (!e.sched.idle()) {
    const StepPlan p = e.step();
    for (const SeqId id : p.preempted) {
      EXPECT_EQ(e.sched.find(id)->tokens, concat(e.prompts[id], e.outputs[id]));
    }
    max_in_use = std::max(max_in_use, e.pool.blocks_in_use());
    ASSERT_LT(e.steps, 10000);
  }
  EXPECT_GT(e.sched.total_preemptions(), 0);
  EXPECT_TRUE(e.failed.empty());
  EXPECT_EQ(max_in_use, 24);
  for (SeqId id = 1; id <= 4; ++id) {
    EXPECT_EQ(e.outputs[id], FakeEngine::expected_output(id, 40)) << id;
  }
  // The oldest sequence is never preempted: it finishes first.
  EXPECT_EQ(e.finish_order.front(), 1);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, PreemptedSequenceRecomputesFromItsCachedBlocks) {
  // Two sequences of 16-token prompts in 10 blocks of 4: both take 5 blocks, then the older one
  // needs a sixth and the newer one is preempted.
  FakeEngine e(continuous(64), 10, 4);
  ASSERT_TRUE(e.add(1, range(0, 16), 8));
  ASSERT_TRUE(e.add(2, range(100, 16), 8));
  std::vector<PlanItem> items_of_2;
  while (!e.sched.idle()) {
    const StepPlan p = e.step();
    for (const PlanItem& item : p.items) {
      if (item.id == 2) items_of_2.push_back(item);
    }
    if (!p.preempted.empty()) {
      EXPECT_EQ(p.preempted, std::vector<SeqId>{2});
      EXPECT_EQ(e.sched.find(2)->preemptions, 1);
      EXPECT_EQ(e.sched.n_waiting(), 1);
      // Not re-admitted in the step that preempted it.
      for (const PlanItem& item : p.items) EXPECT_NE(item.id, 2);
    }
    ASSERT_LT(e.steps, 1000);
  }
  EXPECT_EQ(e.sched.total_preemptions(), 1);
  // Before the preemption, 16 prompt tokens then 4 decode steps (positions 16..19, 5 outputs);
  // after it, the 4 cached prompt blocks are reused (the block of positions 16..19 was
  // evicted first) and positions 16..20 are recomputed in one chunk.
  ASSERT_GE(items_of_2.size(), 6u);
  EXPECT_EQ(items_of_2[4].pos0, 19);
  EXPECT_EQ(items_of_2[5].pos0, 16);
  EXPECT_EQ(items_of_2[5].n_tokens, 5);
  EXPECT_TRUE(items_of_2[5].samples);
  // Only successful admissions count: 16 + 16 queried at first, 21 (16 found) at re-admission.
  EXPECT_EQ(e.pool.stats().prefix_queried_tokens, 16 + 16 + 21);
  EXPECT_EQ(e.pool.stats().prefix_hit_tokens, 16);
  EXPECT_EQ(e.outputs[1], FakeEngine::expected_output(1, 8));
  EXPECT_EQ(e.outputs[2], FakeEngine::expected_output(2, 8));
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, ASequenceThatCannotGrowPreemptsItselfAndWaitsOneStep) {
  // 12 blocks of 4, no prefix cache: sequence 2 prefills 36 tokens in chunks beside 1's decoding
  // until the pool is full, then needs a tenth block for position 36. It is the newest, so it
  // preempts itself; it would fit again at once (its 9 blocks are free), but is re-admitted only
  // in the next step, so that a preemption is never undone in the step that made it.
  SchedulerConfig c = continuous(16);
  c.prefix_caching = false;
  FakeEngine e(c, 12, 4);
  ASSERT_TRUE(e.add(1, range(0, 8), 5));
  ASSERT_TRUE(e.add(2, range(100, 36), 3));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(e.step().preempted.empty());
  EXPECT_EQ(e.pool.blocks_in_use(), 12);
  StepPlan p = e.step();
  EXPECT_EQ(p.preempted, std::vector<SeqId>{2});
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].id, 1);
  EXPECT_EQ(e.sched.n_waiting(), 1);
  EXPECT_EQ(e.pool.blocks_in_use(), 3);
  p = e.step();
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[1].id, 2);
  EXPECT_EQ(p.items[1].pos0, 0);
  EXPECT_EQ(p.items[1].n_tokens, 15);
  e.run();
  EXPECT_EQ(e.outputs[2], FakeEngine::expected_output(2, 3));
  EXPECT_EQ(e.sched.total_preemptions(), 1);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, SequenceLargerThanThePoolFails) {
  // 4 blocks of 4: at most 16 positions.
  FakeEngine e(continuous(64), 4, 4);
  ASSERT_TRUE(e.add(1, range(0, 20), 5));     // its prompt alone needs 5 blocks
  ASSERT_TRUE(e.add(2, range(100, 10), 20));  // fits until position 16
  StepPlan p = e.step();
  EXPECT_EQ(p.failed, std::vector<SeqId>{1});
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].id, 2);
  e.run();
  EXPECT_EQ(e.failed, (std::vector<SeqId>{1, 2}));
  // Positions 0..15 computed: the output of position 9 and of each of 10..15.
  EXPECT_EQ(e.outputs[2], FakeEngine::expected_output(2, 7));
  EXPECT_EQ(e.sched.total_preemptions(), 0);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, FinishWorksInEveryStateAndIgnoresUnknownIds) {
  FakeEngine e(continuous(1024), 16, 4);
  ASSERT_TRUE(e.add(1, range(0, 10), 5));
  ASSERT_TRUE(e.add(2, range(0, 10), 5));
  e.sched.finish(2);  // waiting
  EXPECT_EQ(e.sched.n_waiting(), 1);
  EXPECT_EQ(e.sched.find(2), nullptr);
  e.sched.finish(42);
  e.prompts.erase(2);
  e.step();
  EXPECT_EQ(e.sched.n_running(), 1);
  EXPECT_EQ(e.pool.blocks_in_use(), 3);
  e.sched.finish(1);  // running
  e.prompts.erase(1);
  EXPECT_TRUE(e.sched.idle());
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
  e.sched.finish(1);  // twice: ignored
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, MisuseIsReported) {
  kv::BlockPool pool(16, 4);
  Scheduler s(continuous(1024), pool);
  ASSERT_TRUE(s.add(1, range(0, 6), 4, Clock::time_point{}));
  EXPECT_THROW(s.append_token(1, 5), std::logic_error);  // waiting
  const StepPlan p = s.schedule(Clock::time_point{});
  EXPECT_THROW(s.append_token(1, 5), std::logic_error);  // planned, not yet committed
  s.commit(p);
  EXPECT_THROW(s.commit(p), std::logic_error);  // twice
  s.append_token(1, 5);
  s.append_token(99, 5);  // unknown: ignored
  EXPECT_EQ(s.find(1)->tokens.size(), 7u);
  // The scheduler releases what it holds when destroyed.
  EXPECT_EQ(pool.blocks_in_use(), 2);
}

TEST(Scheduler, DestructorReleasesEverything) {
  kv::BlockPool pool(16, 4);
  {
    Scheduler s(continuous(1024), pool);
    ASSERT_TRUE(s.add(1, range(0, 6), 4, Clock::time_point{}));
    ASSERT_TRUE(s.add(2, range(0, 9), 4, Clock::time_point{}));
    s.commit(s.schedule(Clock::time_point{}));
    EXPECT_EQ(pool.blocks_in_use(), 5);
  }
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

SchedulerConfig static_config(int64_t batch_size, double wait_ms) {
  SchedulerConfig c;
  c.mode = BatchingMode::Static;
  c.batch_size = batch_size;
  c.batch_wait_ms = wait_ms;
  c.max_batch_tokens = 4;  // ignored by static batching
  return c;
}

TEST(Scheduler, StaticBatchWaitsThenRunsWithoutNewcomers) {
  FakeEngine e(static_config(3, 50), 64, 4);
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  e.now = t0;
  ASSERT_TRUE(e.add(1, range(0, 5), 3));   // max_len 8: 2 blocks
  ASSERT_TRUE(e.add(2, range(10, 7), 6));  // max_len 13: 4 blocks
  EXPECT_TRUE(e.step().empty());
  EXPECT_EQ(e.sched.next_batch_deadline(), t0 + milliseconds(50));
  e.now = t0 + milliseconds(49);
  EXPECT_TRUE(e.step().empty());
  EXPECT_EQ(e.pool.blocks_in_use(), 0);

  e.now = t0 + milliseconds(50);
  StepPlan p = e.step();
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[0].id, 1);
  EXPECT_EQ(p.items[0].pos0, 0);
  EXPECT_EQ(p.items[0].n_tokens, 5);  // whole prompts, no token budget
  EXPECT_EQ(p.items[1].n_tokens, 7);
  EXPECT_TRUE(p.items[0].samples && p.items[1].samples);
  EXPECT_EQ(e.sched.find(1)->table.blocks().size(), 2u);  // reserved for max_len
  EXPECT_EQ(e.sched.find(2)->table.blocks().size(), 4u);
  EXPECT_EQ(e.pool.blocks_in_use(), 6);
  EXPECT_EQ(e.sched.next_batch_deadline(), Clock::time_point::max());

  e.now = t0 + milliseconds(60);
  ASSERT_TRUE(e.add(3, range(20, 3), 2));
  EXPECT_EQ(e.sched.next_batch_deadline(), Clock::time_point::max());  // a batch is running
  e.now = t0 + milliseconds(500);
  while (e.sched.find(2) != nullptr) {
    p = e.step();
    for (const PlanItem& item : p.items) {
      EXPECT_NE(item.id, 3);
      EXPECT_EQ(item.n_tokens, 1);
    }
    // No growth: everything was reserved; a member's blocks go when it finishes.
    EXPECT_EQ(e.pool.blocks_in_use(), (e.sched.find(1) ? 2 : 0) + (e.sched.find(2) ? 4 : 0));
    ASSERT_LT(e.steps, 100);
  }
  EXPECT_EQ(e.finish_order, (std::vector<SeqId>{1, 2}));
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
  EXPECT_EQ(e.sched.n_waiting(), 1);
  EXPECT_EQ(e.sched.next_batch_deadline(), t0 + milliseconds(110));

  p = e.step();  // 3 has waited long enough: a batch of one
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].id, 3);
  EXPECT_EQ(p.items[0].n_tokens, 3);
  e.run();
  EXPECT_EQ(e.outputs[3], FakeEngine::expected_output(3, 2));
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, StaticBatchFormsAtOnceWhenFull) {
  FakeEngine e(static_config(3, 1e9), 64, 4);
  ASSERT_TRUE(e.add(1, range(0, 5), 3));
  ASSERT_TRUE(e.add(2, range(0, 5), 3));
  EXPECT_TRUE(e.step().empty());
  ASSERT_TRUE(e.add(3, range(0, 5), 3));
  ASSERT_TRUE(e.add(4, range(0, 5), 3));
  EXPECT_LE(e.sched.next_batch_deadline(), e.now);
  StepPlan p = e.step();
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_EQ(e.sched.n_waiting(), 1);
  EXPECT_EQ(e.pool.stats().prefix_queried_tokens, 0);  // no prefix caching in static mode
  while (e.sched.find(1) || e.sched.find(2) || e.sched.find(3)) {
    for (const PlanItem& item : e.step().items) EXPECT_NE(item.id, 4);
    ASSERT_LT(e.steps, 100);
  }
  // 4 is alone and its wait is a billion milliseconds: nothing happens.
  EXPECT_TRUE(e.step().empty());
  e.sched.finish(4);
  e.prompts.erase(4);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
  EXPECT_EQ(e.pool.stats().blocks_cached, 0);
}

TEST(Scheduler, StaticBatchIsAsLargeAsThePoolAllows) {
  // Each sequence reserves max_len 16 = 4 blocks; the pool holds 10 blocks: two at a time.
  FakeEngine e(static_config(3, 0), 10, 4);
  for (SeqId id = 1; id <= 3; ++id) ASSERT_TRUE(e.add(id, range(0, 6), 10));
  StepPlan p = e.step();
  EXPECT_EQ(p.items.size(), 2u);
  EXPECT_EQ(e.pool.blocks_in_use(), 8);
  EXPECT_EQ(e.sched.n_waiting(), 1);
  e.run();
  EXPECT_EQ(e.finish_order, (std::vector<SeqId>{1, 2, 3}));
  EXPECT_TRUE(e.failed.empty());
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

TEST(Scheduler, StaticSequenceLargerThanThePoolFails) {
  FakeEngine e(static_config(2, 0), 4, 4);
  ASSERT_TRUE(e.add(1, range(0, 5), 20));  // max_len 25: 7 blocks of 4 > 4
  ASSERT_TRUE(e.add(2, range(0, 5), 3));
  StepPlan p = e.step();
  EXPECT_EQ(p.failed, std::vector<SeqId>{1});
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].id, 2);
  e.run();
  EXPECT_EQ(e.outputs[2].size(), 3u);
  EXPECT_EQ(e.pool.blocks_in_use(), 0);
}

}  // namespace
}  // namespace shrike::engine
