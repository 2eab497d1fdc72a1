// The engine thread's side of the engine: it owns the scheduler, the block pool, the KV memory,
// the per-request output processors and the model's scratch; other threads only touch the inbox
// (under its mutex), the request streams and the status atomics.
//
// One step reads like vLLM V1's EngineCore.step():
//   admit()      new requests join the scheduler;
//   expire()     cancelled and timed-out requests end (their blocks are free for planning);
//   schedule()   the scheduler's plan: which sequences, which positions (blocks allocated);
//   execute()    one KV view per planned sequence, one forward pass over the ragged batch;
//   update()     the plan is committed, tokens sampled and appended, finished requests end.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/constrained.h"
#include "engine/engine.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/speculation.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "kv/mixed_precision.h"
#include "kv/paged_kv.h"

namespace shrike::engine {

// A request accepted by submit() and not yet seen by the engine thread.
struct Incoming {
  SeqId id;
  GenerationRequest req;
  std::shared_ptr<RequestStream> stream;
  Clock::time_point submitted;
};

// Where submitters leave requests for the engine thread.
struct Inbox {
  std::mutex mu;  // guards the rest
  std::condition_variable cv;
  std::deque<Incoming> incoming;
  bool stop = false;
  SeqId next_id = 1;
};

// What other threads read of the engine thread's state (gauges(), submit()).
struct EngineStatus {
  std::atomic<int64_t> running{0}, waiting{0}, blocks_used{0}, blocks_cached{0};
  std::atomic<int64_t> f16_copy_bytes{0}, mixed_bytes{0}, tokens_used{0};
  std::atomic<int64_t> prefix_queried{0}, prefix_hit{0};
  std::atomic<int64_t> in_flight{0};  // accepted and not yet given their final event
  std::atomic<int64_t> blocks_committed{0};
};

class EngineCore {
 public:
  // config: as the Engine resolved it (kv_blocks set, the scheduler's own queue limit loose).
  EngineCore(const model::Model& model, const tokenizer::Tokenizer& tok, const EngineConfig& config,
             EngineMetrics& metrics);

  // The engine thread: steps until the inbox says stop, then ends every request.
  void run();

  Inbox& inbox() { return inbox_; }
  // submit() accepted a request (counted until its final event).
  void in_flight_add() { status_.in_flight.fetch_add(1); }
  const EngineStatus& status() const { return status_; }
  const kv::KvStorage& storage() const { return storage_; }

 private:
  // One accepted request while the engine works on it.
  struct Request {
    Request(const GenerationRequest& r, std::shared_ptr<RequestStream> s,
            const tokenizer::Tokenizer& tok, int32_t eos, Clock::time_point now)
        : stream(std::move(s)),
          sampler(r.sampling),
          output(r, tok, eos),
          prompt(r.prompt),
          deadline(r.deadline),
          submitted(now) {}
    std::shared_ptr<RequestStream> stream;
    decode::Sampler sampler;
    OutputProcessor output;
    std::vector<int32_t> prompt;
    std::optional<Clock::time_point> deadline;
    Clock::time_point submitted, first_token{}, last_token{};
    bool scheduled = false;
    std::unique_ptr<ConstrainedDecoding> constrained;  // GenerationRequest::constraint
    int64_t model_steps = 0;                           // forward passes it took part in
  };

  // The step (see the file comment).
  bool admit();  // false when the engine is stopping
  void expire(Clock::time_point now);
  StepPlan schedule(Clock::time_point now);
  bool execute(const StepPlan& plan, Clock::time_point now);
  void update(const StepPlan& plan);

  // Sleeps until a request arrives (nothing to do) or until a static batch may form or a
  // deadline may pass (nothing runnable).
  void wait_for_requests();
  void wait_until_runnable(Clock::time_point now);
  // The view of the paged cache for one planned sequence.
  kv::PagedKvView& bind_view(size_t i, const PlanItem& item, const SeqInfo& seq);
  // One sampled token for a sequence whose last known token was just computed.
  void sample(SeqId id, float* logits, const SeqInfo& seq);
  // Constrained decoding (engine_constrained.cc). choose(): the next token, drawn under the
  // constraint's mask or taken without sampling where only one is allowed; false when the
  // constraint refuses it. initial_forced(): the tokens forced before any output (appended to
  // the prompt, so the first step computes them with it). take_forced(): hands forced tokens to
  // the output processor and the stream, ending the request where they finish it (returns false
  // then). jump_forward(): after a sampled token, the forced run as known tokens for the next
  // step (one prefill chunk), or the end of the request when the constraint is complete.
  bool choose(Request& r, float* logits, decode::SampleResult& s);
  std::vector<int32_t> initial_forced(const Request& r, int64_t max_tokens) const;
  bool take_forced(SeqId id, Request& r, const std::vector<int32_t>& forced, int64_t n_tokens);
  void jump_forward(SeqId id, Request& r, int64_t n_tokens);
  // Speculative decoding: verifies a planned item's drafts (rows: its 1 + n_draft logit rows),
  // rolls the sequence back past the rejected ones and emits the accepted tokens.
  void verify(const PlanItem& item, float* rows);
  // Hands one token to the request's output processor (n_before: the sequence's tokens before
  // it); false when the request ended with it.
  bool emit(SeqId id, Request& r, const decode::SampleResult& s, int64_t n_before);
  // Ends a request: metrics and blocks first (whoever reads the final event then sees them
  // settled), then the final event.
  void end(SeqId id, StreamEvent final_event);
  void end(SeqId id, FinishReason reason, std::string error = {});
  void end_all_at_shutdown();
  // Copies the scheduler's and pool's state into the status atomics.
  void publish();

  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  const EngineConfig config_;  // as resolved by the Engine
  EngineMetrics& metrics_;
  kv::BlockPool pool_;
  kv::KvStorage storage_;
  Scheduler scheduler_;
  std::shared_ptr<SharedCompute> compute_;  // EngineConfig::compute, or the engine's own
  ThreadPool& threads_;
  // A lightly loaded engine whose shared pool is busy with another model's step computes on its
  // own thread alone instead of waiting for the turn (run()); forward passes use step_pool_.
  ThreadPool solo_{1};
  ThreadPool* step_pool_ = &threads_;
  Speculation spec_;
  Inbox inbox_;
  EngineStatus status_;
  std::unordered_map<SeqId, std::unique_ptr<Request>> requests_;
  int64_t admitted_ = 0;  // requests taken from the inbox (EngineConfig::test_fail_admission)
  std::vector<std::unique_ptr<kv::PagedKvView>> views_;
  // int8-mixed: each running sequence's f16 copies and attention weight sums (dropped when it
  // ends or is preempted: it is then recomputed from position 0).
  std::unordered_map<SeqId, std::unique_ptr<kv::MixedPrecisionKv>> mixed_;
  // The forward pass's activations and how its products sum (EngineConfig::batch_invariant).
  model::ForwardScratch scratch_;
  model::ForwardOptions forward_options_;
  std::vector<model::BatchSequence> batch_;
  std::vector<float> logits_;
};

}  // namespace shrike::engine
