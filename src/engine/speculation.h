// Speculative decoding in the engine (issue 16): before each step, the decoding sequences get up
// to k draft tokens each (prompt lookup or a draft model), which the scheduler plans with the
// sampled token they follow (1 + k tokens, counted against the budget); after the target's
// forward pass the k + 1 rows are verified (decode::verify: greedy keeps the longest matching
// prefix, sampling uses rejection sampling), the sequence is rolled back past the rejected
// drafts, and the engine emits the accepted tokens one at a time through the output processor.
//
// Speculation turns itself down per sequence (decode::AdaptiveDraftLength from its recent
// acceptance) and for the whole step while the batch is large (decode::should_speculate /
// draft_token_budget against SpeculativeConfig::max_batch_tokens): a step of many sequences is
// no longer memory-bound, and extra rows cost what they would save.
//
// A constrained request speculates too: its drafts are walked through a copy of its constraint
// cursor (ConstrainedDecoding::draft: cut at the first token the constraint refuses, forced
// positions take the forced token, the draft model draws under the mask), and verification
// samples each row under its position's mask (ConstrainedDecoding::mask_rows), so the output is
// constrained decoding's without speculation. Drafts may follow the forced tokens jump-forward
// appended (they are known tokens, computed in the same step as the drafts).
//
// The draft model has its own per-sequence contiguous KV caches (its weights and caches are small
// next to the target's), kept in step: a sequence's draft cache holds positions whose tokens are
// settled, and is truncated after verification to what was accepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "decode/sampler.h"
#include "decode/speculative.h"
#include "engine/constrained.h"
#include "engine/scheduler.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"

namespace shrike::engine {

enum class SpecMode { Off, Ngram, Draft };
// "off", "ngram", "draft"; parse_spec_mode throws std::invalid_argument for anything else.
const char* spec_mode_name(SpecMode m);
SpecMode parse_spec_mode(const std::string& s);

// Float weights sum a one-token step's products in another order than a multi-token step's, so
// verification rows would differ in the last bits from one-token steps, and greedy output could
// diverge at near-ties: the engine then forces ForwardOptions batch invariance (quantised weights
// are batch-invariant anyway).
bool needs_batch_invariance(const model::Model& target);

struct SpeculativeConfig {
  SpecMode mode = SpecMode::Off;
  const model::Model* draft = nullptr;  // SpecMode::Draft: same vocabulary as the target
  int32_t max_k = 4;                    // longest draft per step
  // Speculate only while a step's tokens before drafts stay below this, and add at most this
  // minus those tokens in drafts: verification pays only while the step is memory-bound.
  // 6: batch 1 with k up to 5, no speculation from 6 decoding sequences on (measured on the
  // intent teacher, whose 5 MB of weights stay in cache: 8 sequences with drafts lost 20-40%
  // of the throughput without them; models larger than the caches can afford more).
  int64_t max_batch_tokens = 6;
  // Prompt lookup drafts only as far as its matches pay (decode::DraftWorth, per match length,
  // learnt across the engine's requests) against the cost of one more verified row relative to
  // a one-token step: 0 measures it from the engine's own steps (decode::StepCost; 0.1 until
  // steps of several sizes were seen); a value in (0, 1) fixes it.
  double row_cost = 0;
  // A draft model drafts only as far as it pays (decode::best_draft_length: its acceptance
  // across requests, its measured pass time and the row cost against the target's one-token step);
  // a draft that does not pay drafts one token every 16th step, to notice when it starts to. false:
  // draft up to the adaptive length whatever it costs (tests of the verifier, comparisons).
  bool cost_aware = true;
  bool enabled() const { return mode != SpecMode::Off; }
  // Why the settings are unusable (empty when fine), e.g. a draft with another vocabulary.
  std::string error(const model::Model& target) const;
};

// Totals over the engine's life (read by other threads through EngineMetrics).
struct SpecTotals {
  decode::SpeculativeStats stats;
  double draft_seconds = 0;
};

class Speculation {
 public:
  Speculation(const SpeculativeConfig& config, const model::Model& target, ThreadPool& threads);
  bool enabled() const { return config_.enabled(); }

  // A request joins / leaves (its per-sequence state). constrained: the request's constraint
  // cursor (owned by the caller, alive until remove()), which its drafts must satisfy.
  void add(SeqId id, const decode::SamplerParams& params,
           const ConstrainedDecoding* constrained = nullptr);
  void remove(SeqId id);

  // Before Scheduler::schedule: drafts for the decoding sequences, handed to the scheduler.
  // Returns the seconds spent drafting.
  double propose(Scheduler& sched);
  // After Scheduler::schedule: forgets drafts the scheduler dropped (the draft model's cache
  // goes back to the settled tokens).
  void planned(const Scheduler& sched);

  // The engine's forward pass over a step of `tokens` tokens took `seconds` (the row cost).
  void observe_step(int64_t tokens, double seconds) { step_cost_.observe(tokens, seconds); }
  double row_cost() const;

  // Verifies one planned item with drafts: rows are its 1 + n_draft logit rows. Updates the
  // sequence's draft length, statistics and draft cache.
  decode::Verification verify(SeqId id, decode::Sampler& sampler, float* rows, int64_t n_vocab,
                              std::span<const int32_t> draft, std::span<const int32_t> prompt,
                              std::span<const int32_t> output, int64_t settled);

  const decode::SpeculativeStats& stats(SeqId id) const;
  const SpecTotals& totals() const { return totals_; }

 private:
  struct Seq {
    Seq(const decode::SamplerParams& p, const decode::AdaptiveDraftOptions& o);
    decode::NgramProposer ngram;
    decode::AdaptiveDraftLength adaptive;
    decode::SpeculativeStats stats;
    decode::Sampler draft_sampler;  // draws the draft model's tokens (its own generator)
    std::unique_ptr<kv::ContiguousKvCache> draft_kv;
    std::vector<float> draft_probs;  // [k][vocab]: q of each draft token (sampling only)
    bool greedy = true;
    const ConstrainedDecoding* constrained = nullptr;
    int32_t matched = 0;  // prompt lookup: the match length of the pending draft
    int32_t pause = 0;    // steps left without speculation (acceptance too low)
    int64_t unpaid = 0;   // steps the draft model's cost rule left without drafts
  };
  // How many draft tokens each decoding sequence gets this step (0: none).
  std::vector<std::pair<SeqId, int32_t>> allot(const Scheduler& sched);
  void propose_ngram(Scheduler& sched, const std::vector<std::pair<SeqId, int32_t>>& allotted);
  void propose_draft(Scheduler& sched, const std::vector<std::pair<SeqId, int32_t>>& allotted);
  int64_t draft_capacity(const SeqInfo& info) const;
  // Draws one draft token from a row of the draft model's logits (q kept when sampling); under
  // the constraint's mask at this position when `walk` is given.
  int32_t draw(Seq& s, float* logits, int32_t i, const SeqInfo& info, ConstrainedDecoding* walk);

  SpeculativeConfig config_;
  const model::Model& target_;
  ThreadPool& threads_;
  std::unordered_map<SeqId, Seq> seqs_;
  SpecTotals totals_;
  // Prompt lookup, per match length: whether its drafts pay, and how often it was skipped (a
  // length that does not pay still drafts one token every kExploreEvery-th time, to notice when
  // it starts to).
  std::vector<decode::DraftWorth> ngram_worth_;
  std::vector<int64_t> ngram_skipped_;
  decode::StepCost step_cost_;
  // The draft model's cost per drafted token of one sequence (a pass with its drawing),
  // decayed average over the passes so far.
  double draft_pass_seconds_ = 0, draft_pass_weight_ = 0;
  // The draft model's per-token acceptance across requests (an intent answer is a few steps
  // long: too short to learn a rate of its own).
  decode::DraftWorth draft_worth_{0.99};
  model::ForwardScratch scratch_;
  std::vector<float> logits_;
  std::vector<decode::TokenProb> probs_;
};

}  // namespace shrike::engine
