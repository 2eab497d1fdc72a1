#include "cli/task_engine.h"

#include <chrono>
#include <memory>
#include <stdexcept>

#include "constrain/constraint.h"
#include "engine/engine.h"
#include "task/answer_constraint.h"
#include "task/task_format.h"
#include "task/task_prompt.h"

namespace shrike::cli {

EngineTaskAnswers engine_task_answers(const model::Model& m, const tokenizer::Tokenizer& tok,
                                      const std::vector<data::Example>& examples,
                                      const task::TaskDefinition* schema, bool jump_forward,
                                      int threads, bool values_from_utterance,
                                      int64_t max_answer_tokens, const task::PromptFormat& format) {
  // The task's answer with a hole for each slot value, compiled once; each request fills the
  // holes with the substrings of its own utterance.
  std::shared_ptr<const constrain::Constraint> holes;
  if (schema)
    holes = std::make_shared<const constrain::Constraint>(
        task::task_answer_automaton(
            schema->intents, schema->slots, task::kTaskValueMaxChars, task::kTaskMaxSlotPairs,
            values_from_utterance ? task::TaskValues::Hole : task::TaskValues::AnyString),
        constrain::TokenVocab::from_tokenizer(tok));
  engine::EngineConfig config;
  config.scheduler.context_length = m.config().context_length;
  config.scheduler.max_queue = int64_t(examples.size()) + 1;
  config.kv = kv::KvCacheOptions{kv::KvType::F32};
  config.batch_invariant = true;
  config.threads = threads;
  config.jump_forward = jump_forward;
  engine::Engine eng(m, tok, config);
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (const data::Example& ex : examples) {
    engine::GenerationRequest r;
    r.prompt = task::encode_task_prompt(tok, ex.text, format);
    r.max_tokens = std::min(max_answer_tokens, eng.context_length() - int64_t(r.prompt.size()));
    r.sampling.temperature = 0;
    r.constraint = holes;
    if (holes && values_from_utterance)  // the utterance as the prompt shows it
      r.constraint = constrain::Constraint::with_holes_filled(
          holes, task::task_values_automaton(task::task_utterance(ex.text)));
    engine::SubmitResult s = eng.submit(std::move(r));
    if (s.status != engine::SubmitStatus::Accepted)
      throw std::runtime_error("the engine refused an example: " + s.message);
    streams.push_back(std::move(s.stream));
  }
  EngineTaskAnswers out;
  for (auto& s : streams) {
    std::string text;
    engine::StreamEvent ev;
    while (!ev.finished)
      if (s->next(ev, std::chrono::milliseconds(1000))) text += ev.text;
    if (ev.finish_reason == engine::FinishReason::Error)
      throw std::runtime_error("an answer failed: " + ev.error);
    out.texts.push_back(std::move(text));
    out.model_steps.push_back(ev.model_steps);
    out.tokens.push_back(ev.completion_tokens);
  }
  return out;
}

}  // namespace shrike::cli
