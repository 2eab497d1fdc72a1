// EngineCore's constrained decoding: the mask at each sampling, forced tokens taken without
// sampling, jump-forward (forced runs appended as known tokens, computed as one prefill chunk),
// and the end of a request whose constraint is complete. The cursor itself is
// ConstrainedDecoding (constrained.h).
#include <algorithm>

#include "engine/engine_core.h"

namespace shrike::engine {

bool EngineCore::choose(Request& r, float* logits, decode::SampleResult& s) {
  const int64_t n_vocab = model_.config().vocab_size;
  const auto prompt = std::span<const int32_t>(r.prompt);
  const auto output = std::span<const int32_t>(r.output.output());
  if (!r.constrained) {
    s = r.sampler.sample(logits, n_vocab, prompt, output);
    return true;
  }
  // One allowed token: taken without a draw (see constrained.h: this is what keeps jump-forward's
  // output equal to step-by-step constrained decoding for sampled requests).
  if (const int32_t only = r.constrained->only_token(); only >= 0) {
    s = decode::SampleResult{only, 0.0f, {}};
  } else {
    s = r.sampler.sample(logits, n_vocab, prompt, output, r.constrained->mask());
  }
  return r.constrained->advance(s.token);
}

std::vector<int32_t> EngineCore::initial_forced(const Request& r, int64_t max_tokens) const {
  if (!r.constrained) return {};
  const int64_t room = config_.scheduler.context_length - 1 - int64_t(r.prompt.size());
  return r.constrained->forced(std::min(room, max_tokens));
}

bool EngineCore::take_forced(SeqId id, Request& r, const std::vector<int32_t>& forced,
                             int64_t n_tokens) {
  const int64_t context = config_.scheduler.context_length;
  for (size_t i = 0; i < forced.size(); ++i) {
    if (!r.constrained->advance(forced[i])) {
      end(id, FinishReason::Error, "the constraint refused its own forced token");
      return false;
    }
    const auto now = Clock::now();
    if (r.output.output().empty()) {
      r.first_token = now;
      metrics_.time_to_first_token.observe(
          std::chrono::duration<double>(now - r.submitted).count());
    }
    r.last_token = now;
    const bool context_full = n_tokens + int64_t(i) + 2 >= context;
    OutputProcessor::Update u =
        r.output.add(decode::SampleResult{forced[i], 0.0f, {}}, context_full);
    if (!u.event.tokens.empty()) metrics_.generated_tokens.fetch_add(1);
    if (u.finish) {
      end(id, std::move(u.event));
      return false;
    }
    r.stream->push(std::move(u.event));
  }
  if (r.constrained->complete()) {
    end(id, FinishReason::Stop);
    return false;
  }
  return true;
}

void EngineCore::jump_forward(SeqId id, Request& r, int64_t n_tokens) {
  if (r.constrained->complete()) return end(id, FinishReason::Stop);
  const int64_t room = std::min(config_.scheduler.context_length - 1 - n_tokens,
                                r.output.max_tokens() - int64_t(r.output.output().size()));
  const std::vector<int32_t> forced = r.constrained->forced(room);
  if (forced.empty()) return;
  if (take_forced(id, r, forced, n_tokens)) scheduler_.append_forced(id, forced);
}

}  // namespace shrike::engine
