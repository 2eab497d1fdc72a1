#include "server/generation_request.h"

#include "constrain/constraint.h"
#include "constrain/error.h"

namespace shrike::server {

std::variant<engine::GenerationRequest, ApiError> to_generation_request(ParsedRequest& p,
                                                                        const RequestContext& ctx) {
  if (!p.model.empty() && p.model != ctx.model_name) return model_not_found(p.model);

  // Prompt tokens. Special-token text in the prompt ("<|im_start|>") becomes those tokens, as in
  // llama.cpp's and vLLM's servers; chat templates depend on it.
  const tokenizer::Tokenizer& tok = ctx.tok;
  const bool chat = p.endpoint == Endpoint::ChatCompletions;
  std::vector<int32_t> prompt;
  if (chat) {
    prompt = tok.encode(render_chat(ctx.chat_format, p.messages), ctx.add_bos, true);
  } else if (p.prompt_is_tokens) {
    for (size_t i = 0; i < p.prompt_tokens.size(); ++i)
      if (p.prompt_tokens[i] >= tok.n_vocab())
        return bad_request("Invalid 'prompt[" + std::to_string(i) + "]': token id " +
                               std::to_string(p.prompt_tokens[i]) +
                               " is outside the vocabulary of " + std::to_string(tok.n_vocab()) +
                               " tokens.",
                           "prompt", "invalid_value");
    prompt = std::move(p.prompt_tokens);
  } else {
    prompt = tok.encode(p.prompt_text, ctx.add_bos, true);
  }
  if (prompt.empty())
    return bad_request("The prompt is empty: it encodes to no tokens.",
                       chat ? "messages" : "prompt", "empty_prompt");
  const auto max_tokens =
      resolve_max_tokens(int64_t(prompt.size()), p.max_tokens, ctx.context_length);
  if (const auto* e = std::get_if<ApiError>(&max_tokens)) return *e;

  std::shared_ptr<const constrain::Constraint> constraint;
  if (p.constraint) {
    try {
      if (ctx.compile_constraint) {
        constraint = ctx.compile_constraint(*p.constraint);
      } else {
        constraint = std::make_shared<const constrain::Constraint>(
            constrain::compile(*p.constraint), constrain::TokenVocab::from_tokenizer(tok));
      }
    } catch (const constrain::ConstraintError& e) {
      return bad_request("Invalid '" + p.constraint_param + "': " + e.what(), p.constraint_param,
                         "invalid_constraint");
    }
  }

  engine::GenerationRequest g;
  g.constraint = std::move(constraint);
  g.prompt = std::move(prompt);
  g.sampling = p.sampling;
  if (!p.seed_given) g.sampling.seed = ctx.fresh_seed;
  g.max_tokens = std::get<int64_t>(max_tokens);
  g.stop = std::move(p.stop);
  g.ignore_eos = p.ignore_eos;
  g.jump_forward = p.jump_forward;
  const double timeout_s = p.timeout_s ? *p.timeout_s : ctx.default_timeout_s;
  if (timeout_s > 0)
    g.deadline = ctx.now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(timeout_s));
  return g;
}

ApiError submit_refusal(const engine::SubmitResult& sub, bool server_draining,
                        const std::string& model_name) {
  switch (sub.status) {
    case engine::SubmitStatus::QueueFull:
      return queue_full(sub.message.empty()
                            ? "The request queue is full; retry later."
                            : "The request queue is full; retry later (" + sub.message + ").");
    case engine::SubmitStatus::Draining:
      if (!server_draining) return model_not_found(model_name);
      return unavailable("The server is shutting down and accepts no new requests.");
    case engine::SubmitStatus::Invalid:
    case engine::SubmitStatus::Accepted:
      break;
  }
  return bad_request(sub.message.empty() ? "Invalid request." : sub.message);
}

}  // namespace shrike::server
