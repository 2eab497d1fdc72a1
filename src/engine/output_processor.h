// What a request's sampled tokens become for its submitter: detokenised text (whole UTF-8
// characters only), stop strings (the text ends before the first match, and text that may begin
// one is held back until the next token decides), end of sequence, max_tokens, log
// probabilities, and the StreamEvents that carry it all. It knows nothing of scheduling or the
// model, so it is unit-tested alone; the engine samples, then hands each token here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "decode/sampler.h"
#include "engine/request.h"
#include "tokenizer/stream.h"
#include "tokenizer/tokenizer.h"

namespace shrike::engine {

class OutputProcessor {
 public:
  // eos: the model's end-of-sequence id (the tokenizer's counts too). The tokenizer must outlive
  // this; the request's settings are copied.
  OutputProcessor(const GenerationRequest& req, const tokenizer::Tokenizer& tok, int32_t eos);

  struct Update {
    std::optional<FinishReason> finish;  // the request ends with this token (Stop or Length)
    StreamEvent event;                   // to send (the final one when finish is set)
  };
  // One sampled token. context_full: the sequence cannot take another token after it.
  Update add(const decode::SampleResult& r, bool context_full);
  // The final event of a request ending for another reason (cancelled, deadline, error, the
  // engine shutting down): whatever text was held back, the usage.
  StreamEvent finish(FinishReason reason, std::string error = {});

  // Prompt positions found in the prefix cache, reported in the usage.
  void set_cached_prompt(int64_t n) { cached_prompt_ = n; }
  const std::vector<int32_t>& output() const { return output_; }
  int64_t max_tokens() const { return max_tokens_; }

 private:
  bool is_eos(int32_t token) const;
  // The start of the first stop string completed by text appended from `before` on; npos if none.
  size_t find_stop(size_t before) const;
  // Moves the text that is safe to send (all of it when final) into ev.
  void take_text(StreamEvent& ev, bool final_flush);
  StreamEvent final_event(StreamEvent ev, FinishReason reason, std::string error, bool flush);

  std::vector<std::string> stop_;
  int64_t max_tokens_;
  int64_t prompt_tokens_;
  bool ignore_eos_;
  bool logprobs_;  // logprobs or top_logprobs requested
  const tokenizer::Tokenizer& tok_;
  int32_t eos_;
  tokenizer::StreamDecoder decoder_;
  std::vector<int32_t> output_;  // generated tokens
  std::string text_;             // complete text generated so far (stop strings not yet cut)
  size_t sent_ = 0;              // bytes of text_ already sent
  size_t max_stop_ = 0;          // longest stop string
  int64_t cached_prompt_ = 0;
};

}  // namespace shrike::engine
