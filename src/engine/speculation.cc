#include "engine/speculation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <stdexcept>

namespace shrike::engine {
namespace {

// A sequence whose drafts are almost never accepted at the shortest length stops speculating
// for a while (a 2-row step costs more than a 1-row one), then tries again.
constexpr double kPauseBelow = 0.1;
constexpr int32_t kPauseSteps = 16;
constexpr int64_t kExploreEvery = 16;

}  // namespace

bool needs_batch_invariance(const model::Model& target) {
  const DType t = target.weights().weight_type();
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

const char* spec_mode_name(SpecMode m) {
  switch (m) {
    case SpecMode::Off:
      return "off";
    case SpecMode::Ngram:
      return "ngram";
    case SpecMode::Draft:
      return "draft";
  }
  return "?";
}

SpecMode parse_spec_mode(const std::string& s) {
  if (s == "off") return SpecMode::Off;
  if (s == "ngram") return SpecMode::Ngram;
  if (s == "draft") return SpecMode::Draft;
  throw std::invalid_argument("speculation: unknown mode '" + s + "' (off, ngram, draft)");
}

std::string SpeculativeConfig::error(const model::Model& target) const {
  if (max_k < 1 || max_k > 16) return "spec-k must be in [1, 16]";
  if (max_batch_tokens < 1) return "the speculation batch limit must be >= 1";
  if (!(row_cost >= 0 && row_cost < 1))
    return "the speculation row cost must be in [0, 1) (0: measured)";
  if (mode != SpecMode::Draft) return {};
  if (draft == nullptr) return "speculation with a draft model needs --draft MODEL";
  if (draft->config().vocab_size != target.config().vocab_size)
    return "the draft model's vocabulary (" + std::to_string(draft->config().vocab_size) +
           ") differs from the target's (" + std::to_string(target.config().vocab_size) + ")";
  return {};
}

Speculation::Seq::Seq(const decode::SamplerParams& p, const decode::AdaptiveDraftOptions& o)
    : adaptive(o),
      draft_sampler([&] {
        decode::SamplerParams d = p;
        d.seed = p.seed ^ 0x9e3779b97f4a7c15ull;  // its own stream of draws
        d.logprobs = false;
        d.top_logprobs = 0;
        return d;
      }()),
      greedy(decode::Sampler(p).greedy()) {}

Speculation::Speculation(const SpeculativeConfig& config, const model::Model& target,
                         ThreadPool& threads)
    : config_(config), target_(target), threads_(threads) {
  if (const std::string e = config_.error(target); !e.empty()) throw std::invalid_argument(e);
  ngram_worth_.assign(size_t(decode::NgramProposer::kMaxNgram + 1), decode::DraftWorth());
  ngram_skipped_.assign(ngram_worth_.size(), 0);
}

void Speculation::add(SeqId id, const decode::SamplerParams& params,
                      const ConstrainedDecoding* constrained) {
  if (!enabled()) return;
  decode::AdaptiveDraftOptions o;
  o.max_k = config_.max_k;
  o.initial_k = std::min(o.initial_k, o.max_k);
  seqs_.try_emplace(id, params, o).first->second.constrained = constrained;
}

void Speculation::remove(SeqId id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  totals_.stats.steps += it->second.stats.steps;
  totals_.stats.proposed += it->second.stats.proposed;
  totals_.stats.accepted += it->second.stats.accepted;
  seqs_.erase(it);
}

const decode::SpeculativeStats& Speculation::stats(SeqId id) const {
  static const decode::SpeculativeStats none;
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? none : it->second.stats;
}

std::vector<std::pair<SeqId, int32_t>> Speculation::allot(const Scheduler& sched) {
  std::vector<std::pair<SeqId, int32_t>> out;
  // Under continuous batching a waiting request is about to be admitted with its prefill: the
  // step is not small. A static batch admits nobody until it ends, so its queue does not count.
  if (sched.config().mode == BatchingMode::Continuous && sched.n_waiting() > 0) return out;
  int64_t batch_tokens = 0;
  for (SeqId id : sched.running()) {
    const SeqInfo& info = *sched.find(id);
    batch_tokens += int64_t(info.tokens.size()) - info.n_computed;
  }
  if (!decode::should_speculate(batch_tokens, config_.max_batch_tokens)) return out;
  int64_t budget = decode::draft_token_budget(batch_tokens, config_.max_batch_tokens);
  for (SeqId id : sched.running()) {
    const SeqInfo& info = *sched.find(id);
    const auto it = seqs_.find(id);
    const int64_t known = int64_t(info.tokens.size());
    if (budget <= 0) break;
    // Drafts follow the sequence's known tokens: its sampled token, and the tokens jump-forward
    // forced after it (computed in the same step). Not while the prompt is being computed.
    if (it == seqs_.end() || info.n_draft != 0 || info.n_computed >= known ||
        info.n_computed < info.prompt_len)
      continue;
    Seq& s = it->second;
    if (s.pause > 0) {
      --s.pause;
      continue;
    }
    int64_t k = std::min({int64_t(s.adaptive.k()), info.max_len - known, budget});
    // The draft model computes positions up to known + k - 2, within its own context.
    if (config_.mode == SpecMode::Draft) k = std::min(k, draft_capacity(info) - known + 1);
    // A constrained request ends a forced run one position before the context's end (the
    // engine's jump-forward rule), sampled tokens at it: drafts stay clear of that edge.
    if (s.constrained) k = std::min(k, sched.config().context_length - known - 3);
    if (k <= 0) continue;
    // A draft model drafts only as far as it pays, once its cost and the target's are measured.
    if (config_.mode == SpecMode::Draft && config_.cost_aware && draft_pass_weight_ >= 4) {
      const double step = step_cost_.one_token_seconds();
      if (step > 0) {
        const double draft_cost = draft_pass_seconds_ / draft_pass_weight_ / step;
        const int32_t pays =
            decode::best_draft_length(draft_worth_.rate(), draft_cost, row_cost(), int32_t(k));
        if (pays == 0 && ++s.unpaid % kExploreEvery != 0) continue;
        k = std::max<int64_t>(1, std::min<int64_t>(k, pays));
      }
    }
    out.push_back({id, int32_t(k)});
    budget -= k;
  }
  return out;
}

int64_t Speculation::draft_capacity(const SeqInfo& info) const {
  return std::min(info.max_len, config_.draft->config().context_length);
}

double Speculation::propose(Scheduler& sched) {
  if (!enabled()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto allotted = allot(sched);
  if (allotted.empty()) return 0;
  try {
    if (config_.mode == SpecMode::Ngram)
      propose_ngram(sched, allotted);
    else
      propose_draft(sched, allotted);
  } catch (const std::exception&) {
    // Drafting is optional: a failed draft pass only costs this step its drafts (the draft
    // caches go back to settled tokens in planned()).
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  totals_.draft_seconds += s;
  return s;
}

void Speculation::propose_ngram(Scheduler& sched,
                                const std::vector<std::pair<SeqId, int32_t>>& allotted) {
  const double cost = row_cost();
  for (const auto& [id, k] : allotted) {
    Seq& s = seqs_.at(id);
    const std::vector<int32_t>& tokens = sched.find(id)->tokens;
    // The proposer sees settled tokens only (prompt and emitted), so it never rolls back.
    const size_t have = s.ngram.tokens().size();
    if (have < tokens.size())
      s.ngram.append(std::span<const int32_t>(tokens.data() + have, tokens.size() - have));
    int32_t matched = 0;
    std::vector<int32_t> draft = s.ngram.propose(k, &matched);
    if (draft.empty()) continue;
    // As many of the proposal's tokens as matches of this length pay for (see ngram_worth_).
    int32_t worth = ngram_worth_[size_t(matched)].worth(k, cost);
    if (worth == 0 && ++ngram_skipped_[size_t(matched)] % kExploreEvery == 0) worth = 1;
    if (worth == 0) continue;
    draft.resize(std::min(draft.size(), size_t(worth)));
    // Constrained: forced tokens after the proposal are certain once it is accepted (up to k).
    if (s.constrained) draft = s.constrained->draft(draft, k);
    s.matched = matched;
    if (!draft.empty()) sched.add_draft(id, draft);
  }
}

int32_t Speculation::draw(Seq& s, float* logits, int32_t i, const SeqInfo& info,
                          ConstrainedDecoding* walk) {
  const int64_t n_vocab = target_.config().vocab_size;
  // Constrained: a forced position takes its token (q a point mass), any other draws under the
  // position's mask, so every draft is one the constraint allows.
  const int32_t only = walk != nullptr ? walk->only_token() : -1;
  if (s.greedy) {  // greedy needs no q; under a mask only the allowed logits are read
    if (only >= 0) return only;
    if (walk == nullptr) return decode::argmax(logits, n_vocab);
    const int32_t t = decode::masked_argmax(logits, n_vocab, *walk->mask());
    return t >= 0 ? t : 0;  // nothing allowed: the walk refuses whatever is drawn
  }
  if (walk != nullptr && only < 0) decode::apply_token_mask(logits, n_vocab, *walk->mask());
  float* q = s.draft_probs.data() + size_t(i) * size_t(n_vocab);
  if (only >= 0) {
    std::fill(q, q + n_vocab, 0.0f);
    q[only] = 1.0f;
    return only;
  }
  // Sampling: q is the draft's distribution under the request's own processing.
  const std::span<const int32_t> prompt(info.tokens.data(), size_t(info.prompt_len));
  const std::span<const int32_t> output(info.tokens.data() + info.prompt_len,
                                        info.tokens.size() - size_t(info.prompt_len));
  s.draft_sampler.probabilities(logits, n_vocab, prompt, output, &probs_);
  std::fill(q, q + n_vocab, 0.0f);
  for (const auto& tp : probs_) q[tp.token] = float(tp.prob);
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(s.draft_sampler.generator());
  for (const auto& tp : probs_) {
    u -= tp.prob;
    if (u < 0) return tp.token;
  }
  return probs_.back().token;
}

void Speculation::propose_draft(Scheduler& sched,
                                const std::vector<std::pair<SeqId, int32_t>>& allotted) {
  const model::Model& draft = *config_.draft;
  const int64_t n_vocab = target_.config().vocab_size;
  const size_t m = allotted.size();
  std::vector<std::vector<int32_t>> drafts(m);
  // Per sequence: its draft length (shorter when its constraint completes or refuses), for a
  // constrained request a copy of its cursor walking the drafts, and the tokens the draft model
  // reads next (from position feed_pos), the last of which is the one whose successor it drafts.
  std::vector<int32_t> ks(m);
  std::vector<std::optional<ConstrainedDecoding>> walks(m);
  std::vector<std::vector<int32_t>> feed(m);
  std::vector<int64_t> feed_pos(m);
  // Forced positions (the constraint allows one token) are drafted without the draft model, as
  // jump-forward does for the target: their tokens join the next pass's input, so a run of JSON
  // punctuation and key names costs the draft one pass instead of one per token.
  auto take_forced = [&](size_t a) {
    ConstrainedDecoding* walk = walks[a] ? &*walks[a] : nullptr;
    if (walk == nullptr) return;
    Seq& s = seqs_.at(allotted[a].first);
    while (!walk->complete() && int32_t(drafts[a].size()) < ks[a]) {
      const int32_t f = walk->only_token();
      if (f < 0 || !walk->advance(f)) break;
      if (!s.greedy) {  // q is a point mass at a forced position
        float* q = s.draft_probs.data() + drafts[a].size() * size_t(n_vocab);
        std::fill(q, q + n_vocab, 0.0f);
        q[f] = 1.0f;
      }
      drafts[a].push_back(f);
      feed[a].push_back(f);
    }
    if (walk->complete()) ks[a] = int32_t(drafts[a].size());  // nothing can follow
  };
  for (size_t a = 0; a < m; ++a) {
    const auto& [id, k] = allotted[a];
    ks[a] = k;
    Seq& s = seqs_.at(id);
    if (s.constrained != nullptr) {
      walks[a].emplace(*s.constrained);
      if (walks[a]->complete()) ks[a] = 0;
    }
    const SeqInfo& info = *sched.find(id);
    const int64_t known = int64_t(info.tokens.size());
    // Catch up with the settled tokens the draft has not seen.
    if (!s.draft_kv)
      s.draft_kv = std::make_unique<kv::ContiguousKvCache>(
          draft.config().n_layers, draft_capacity(info), draft.config().n_kv_heads,
          draft.config().head_dim);
    s.draft_kv->truncate(known - 1);  // never ahead of the settled tokens
    if (!s.greedy) s.draft_probs.resize(size_t(k) * size_t(n_vocab));
    feed_pos[a] = s.draft_kv->n_positions();
    feed[a].assign(info.tokens.begin() + feed_pos[a], info.tokens.end());
    take_forced(a);
  }
  std::vector<model::BatchSequence> batch;
  std::vector<size_t> member;  // batch entry -> index in allotted
  for (;;) {
    batch.clear();
    member.clear();
    for (size_t a = 0; a < m; ++a) {
      if (int32_t(drafts[a].size()) >= ks[a]) continue;
      batch.push_back({feed[a].data(), int64_t(feed[a].size()), feed_pos[a],
                       seqs_.at(allotted[a].first).draft_kv.get(), 1});
      member.push_back(a);
    }
    if (batch.empty()) break;
    const auto pass_start = std::chrono::steady_clock::now();
    logits_.resize(batch.size() * size_t(n_vocab));
    draft.forward_batch(batch.data(), int64_t(batch.size()), logits_.data(), threads_, scratch_);
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t a = member[b];
      Seq& s = seqs_.at(allotted[a].first);
      ConstrainedDecoding* walk = walks[a] ? &*walks[a] : nullptr;
      const int32_t t = draw(s, logits_.data() + b * size_t(n_vocab), int32_t(drafts[a].size()),
                             *sched.find(allotted[a].first), walk);
      if (walk != nullptr && !walk->advance(t)) {  // nothing allowed was drawn: stop here
        ks[a] = int32_t(drafts[a].size());
        continue;
      }
      drafts[a].push_back(t);
      feed_pos[a] += int64_t(feed[a].size());
      feed[a].assign(1, t);
      take_forced(a);
    }
    // What a drafted token costs one sequence (the pass and the drawing); a pass that catches
    // up with a prompt is prefill, not drafting, and does not count.
    bool drafting_pass = true;
    for (const model::BatchSequence& bs : batch) drafting_pass &= bs.n_tokens <= 8;
    if (drafting_pass) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - pass_start).count();
      draft_pass_seconds_ = draft_pass_seconds_ * 0.98 + seconds / double(batch.size());
      draft_pass_weight_ = draft_pass_weight_ * 0.98 + 1;
    }
  }
  for (size_t a = 0; a < m; ++a)
    if (!drafts[a].empty()) sched.add_draft(allotted[a].first, drafts[a]);
}

void Speculation::planned(const Scheduler& sched) {
  if (config_.mode != SpecMode::Draft) return;
  // A draft cache may hold positions of drafts the scheduler dropped: back to settled tokens.
  for (auto& [id, s] : seqs_) {
    if (!s.draft_kv) continue;
    const SeqInfo* info = sched.find(id);
    if (info == nullptr || info->n_draft > 0) continue;
    s.draft_kv->truncate(std::max<int64_t>(0, int64_t(info->tokens.size()) - 1));
  }
}

double Speculation::row_cost() const {
  return config_.row_cost > 0 ? config_.row_cost : step_cost_.row_cost(0.1);
}

decode::Verification Speculation::verify(SeqId id, decode::Sampler& sampler, float* rows,
                                         int64_t n_vocab, std::span<const int32_t> draft,
                                         std::span<const int32_t> prompt,
                                         std::span<const int32_t> output, int64_t settled) {
  Seq& s = seqs_.at(id);
  const float* q = config_.mode == SpecMode::Draft && !s.greedy ? s.draft_probs.data() : nullptr;
  decode::Verification v = decode::verify(sampler, draft, q, rows, n_vocab, prompt, output);
  s.stats.add(int32_t(draft.size()), v.accepted);
  if (config_.mode == SpecMode::Ngram && s.matched > 0)
    ngram_worth_[size_t(s.matched)].update(int32_t(draft.size()), v.accepted);
  if (config_.mode == SpecMode::Draft) draft_worth_.update(int32_t(draft.size()), v.accepted);
  s.adaptive.update(int32_t(draft.size()), v.accepted);
  if (s.adaptive.k() == 1 && s.adaptive.acceptance_rate() < kPauseBelow) s.pause = kPauseSteps;
  // The draft cache keeps the positions whose tokens were accepted (settled + accepted).
  if (s.draft_kv) s.draft_kv->truncate(settled + v.accepted);
  return v;
}

}  // namespace shrike::engine
