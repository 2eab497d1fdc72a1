#include "engine/output_processor.h"

#include <algorithm>
#include <utility>

namespace shrike::engine {
namespace {

// Length of the longest suffix of text (from `from` on) that is a proper prefix of some stop
// string: those bytes are held back, since the next token may complete the stop string.
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

}  // namespace

OutputProcessor::OutputProcessor(const GenerationRequest& req, const tokenizer::Tokenizer& tok,
                                 int32_t eos)
    : stop_(req.stop),
      max_tokens_(req.max_tokens),
      prompt_tokens_(int64_t(req.prompt.size())),
      ignore_eos_(req.ignore_eos),
      logprobs_(req.sampling.logprobs || req.sampling.top_logprobs > 0),
      tok_(tok),
      eos_(eos),
      decoder_(tok) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
  for (const auto& s : stop_) max_stop_ = std::max(max_stop_, s.size());
}

bool OutputProcessor::is_eos(int32_t token) const {
  return !ignore_eos_ && (token == tok_.eos() || token == eos_);
}

OutputProcessor::Update OutputProcessor::add(const decode::SampleResult& r, bool context_full) {
  Update u;
  if (is_eos(r.token)) {  // not part of the output
    u.finish = FinishReason::Stop;
    u.event = final_event({}, FinishReason::Stop, {}, true);
    return u;
  }
  output_.push_back(r.token);
  u.event.tokens.push_back(r.token);
  if (logprobs_) u.event.logprobs.push_back({r.token, r.logprob, r.top});
  const size_t before = text_.size();
  text_ += decoder_.push(r.token);
  if (const size_t found = find_stop(before); found != std::string::npos) {
    text_.resize(found);  // nothing may follow the text before a stop string
    u.finish = FinishReason::Stop;
    u.event = final_event(std::move(u.event), FinishReason::Stop, {}, false);
    return u;
  }
  if (int64_t(output_.size()) >= max_tokens_ || context_full) {
    u.finish = FinishReason::Length;
    u.event = final_event(std::move(u.event), FinishReason::Length, {}, true);
    return u;
  }
  take_text(u.event, false);
  return u;
}

StreamEvent OutputProcessor::finish(FinishReason reason, std::string error) {
  return final_event({}, reason, std::move(error), true);
}

size_t OutputProcessor::find_stop(size_t before) const {
  if (max_stop_ == 0) return std::string::npos;
  // Only where the new text can reach: a match wholly in older text would have been found then.
  const size_t from = std::max(before >= max_stop_ ? before - max_stop_ + 1 : 0, sent_);
  size_t found = std::string::npos;
  for (const auto& s : stop_) found = std::min(found, text_.find(s, from));
  return found;
}

void OutputProcessor::take_text(StreamEvent& ev, bool final_flush) {
  size_t end = text_.size();
  if (!final_flush) end -= held_suffix(text_, sent_, stop_);
  ev.text = text_.substr(sent_, end - sent_);
  sent_ = end;
}

StreamEvent OutputProcessor::final_event(StreamEvent ev, FinishReason reason, std::string error,
                                         bool flush) {
  if (flush) text_ += decoder_.flush();
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = std::move(error);
  ev.prompt_tokens = prompt_tokens_;
  ev.completion_tokens = int64_t(output_.size());
  ev.cached_prompt_tokens = cached_prompt_;
  take_text(ev, true);
  return ev;
}

}  // namespace shrike::engine
