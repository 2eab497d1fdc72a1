// The serving engine: a loop on its own thread (EngineCore) that runs the scheduler's plan
// through the model step after step, samples, turns tokens into text (OutputProcessor: stop
// strings, logprobs), applies deadlines, and hands each request's output to whoever submitted it
// (the HTTP threads) through a RequestStream.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "decode/sampler.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/shared_compute.h"
#include "engine/speculation.h"
#include "kv/kv_cache.h"
#include "kv/shared_budget.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace shrike::engine {

enum class SubmitStatus { Accepted, QueueFull, Draining, Invalid };

struct SubmitResult {
  SubmitStatus status = SubmitStatus::Invalid;
  std::shared_ptr<RequestStream> stream;  // when Accepted
  std::string message;                    // otherwise: why, for the client
};

class EngineCore;

struct EngineConfig {
  SchedulerConfig scheduler;  // context_length is clamped to the model's
  int64_t block_size = 16;
  int64_t kv_blocks = 0;  // 0: enough for max_seqs sequences of the full context, capped by
                          // kv_cache_bytes
  size_t kv_cache_bytes = size_t(2) << 30;
  // The KV cache (kv::KvCacheOptions): f16 by default (half the memory and the bytes attention
  // reads per token of f32, so about twice the blocks within kv_cache_bytes), f32, int8 (one f32
  // scale per position and kv head: head_dim + 4 bytes per row instead of 2 * head_dim) or
  // int8-mixed (int8 blocks plus per-sequence f16 copies of sinks, the recent window, heavy
  // hitters and chosen layers; kv_cache_bytes then also covers the copies' bound). int8-mixed
  // turns prefix caching off: a reused block would come without the f16 copies and attention
  // weights the policy keeps per sequence, so a warm request would not give the cold output.
  // Invalid options: std::invalid_argument.
  kv::KvCacheOptions kv{kv::KvType::F16};
  int threads = 0;  // 0: default_thread_count()
  // The engine's forward passes sum every product in one order (model::ForwardOptions): float-
  // weight outputs then do not depend on what else is batched, at some cost to single-sequence
  // decode (quantised weights always are). Per engine, not process-wide.
  bool batch_invariant = false;
  // Constrained requests' jump-forward (GenerationRequest::jump_forward); false turns it off for
  // every request.
  bool jump_forward = true;
  // Speculative decoding (engine/speculation.h); continuous batching only. With float weights
  // it turns batch_invariant on (greedy output must equal non-speculative greedy).
  SpeculativeConfig spec;
  // Several engines in one process (a server holding several models). compute: the threads they
  // share, one step at a time (threads is then ignored); null: the engine's own pool.
  // kv_budget: the KV memory budget they share (kv/shared_budget.h); the engine then sizes its
  // pool to what the budget could ever give it (kv_cache_bytes still caps it), commits its memory
  // lazily, and uses a block never used before only with the budget's grant. Null: kv_cache_bytes
  // alone, committed at start.
  std::shared_ptr<SharedCompute> compute;
  std::shared_ptr<kv::KvBudgetAccount> kv_budget;
  // Tests only (fault injection; `shrike serve --test-fail-admission N`, hidden): every Nth
  // request the engine admits throws std::bad_alloc where its state is allocated, as a real
  // allocation failure there would. 0: never.
  int64_t test_fail_admission = 0;
};

class Engine {
 public:
  // Starts the engine thread. The model and tokenizer must outlive the engine.
  Engine(const model::Model& model, const tokenizer::Tokenizer& tok, EngineConfig config);
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Invalid (empty prompt, prompt of context_length tokens or more, a token outside
  // the vocabulary, max_tokens < 1), Draining after drain(), QueueFull when max_queue requests
  // wait; the message says which.
  SubmitResult submit(GenerationRequest req);

  // Refuse new requests from now on; running and waiting ones continue.
  void drain();
  bool draining() const { return draining_.load(); }
  // Nothing waiting or running.
  bool idle() const;
  // Cancels every request (each gets its final event) and stops the engine thread. Idempotent.
  void shutdown();

  const EngineConfig& config() const { return config_; }
  int64_t context_length() const { return config_.scheduler.context_length; }
  const model::Model& model() const { return model_; }
  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  EngineMetrics& metrics() { return metrics_; }
  EngineGauges gauges() const;

 private:
  const model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  EngineConfig config_;
  EngineMetrics metrics_;
  std::atomic<bool> draining_{false};
  std::unique_ptr<EngineCore> core_;
  std::thread thread_;
};

}  // namespace shrike::engine
