#include "task/task_training.h"

#include <cstdio>
#include <stdexcept>

#include "task/task_eval.h"
#include "train/inference_model.h"

namespace shrike::task {

train::TrainingSequence encode_task(const tokenizer::Tokenizer& tok, const data::Example& ex,
                                    const PromptFormat& format) {
  train::TrainingSequence s;
  s.tokens = encode_task_prompt(tok, ex.text, format);
  s.prompt_length = int64_t(s.tokens.size());
  std::vector<int32_t> answer = tok.encode(task::task_answer(ex), /*add_bos=*/false);
  answer.push_back(tok.eos());
  s.tokens.insert(s.tokens.end(), answer.begin(), answer.end());
  // Position t predicts token t + 1: the last prompt position predicts the first answer token.
  s.targets.assign(s.tokens.size(), -1);
  for (size_t t = size_t(s.prompt_length) - 1; t + 1 < s.tokens.size(); ++t)
    s.targets[t] = s.tokens[t + 1];
  return s;
}

train::DevScores dev_scores(const TaskScores& s) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "intent %.2f%%, slot F1 %.2f%%, exact %.2f%%",
                100 * s.intent_accuracy, 100 * s.slot_f1, 100 * s.exact_accuracy);
  return {s.n, buf};
}

void train_task(train::Transformer<float>& model, const tokenizer::Tokenizer& tok,
                const std::vector<data::Example>& train, const std::vector<data::Example>& dev,
                const train::TrainOptions& opt, train::OptimizerState& state, ThreadPool& pool,
                const std::function<void(const train::EpochReport&)>& on_epoch,
                const PromptFormat& format) {
  if (train.empty()) throw std::invalid_argument("train: no training examples");
  const model::ModelConfig& c = model.config();
  if (tok.n_vocab() != c.vocab_size)
    throw std::invalid_argument("train: tokenizer and model vocabulary sizes differ");
  std::vector<train::TrainingSequence> seqs;
  seqs.reserve(train.size());
  for (const data::Example& ex : train) {
    seqs.push_back(encode_task(tok, ex, format));
    if (int64_t(seqs.back().tokens.size()) > c.context_length)
      throw std::invalid_argument("train: an example of " +
                                  std::to_string(seqs.back().tokens.size()) +
                                  " tokens exceeds the context length " +
                                  std::to_string(c.context_length) + ": \"" + ex.text + "\"");
  }
  const std::vector<data::Example> dev_subset(
      dev.begin(), dev.begin() + std::min<int64_t>(int64_t(dev.size()), opt.dev_limit));
  train::SequenceEvaluator evaluate;
  if (!dev_subset.empty())
    evaluate = [&](const train::Transformer<float>& trained) {
      const auto m = train::to_inference_model(trained);
      return dev_scores(score_task(dev_subset, predict_task(*m, tok, dev_subset, pool, format)));
    };
  train::train_sequences(model, tok.vocab(), seqs, opt, state, pool, evaluate, on_epoch);
}

std::vector<quant::ScoredSequence> task_sequences(const tokenizer::Tokenizer& tok,
                                                  const std::vector<data::Example>& examples,
                                                  const PromptFormat& format) {
  std::vector<quant::ScoredSequence> out;
  out.reserve(examples.size());
  for (const data::Example& ex : examples) {
    train::TrainingSequence t = encode_task(tok, ex, format);
    // Position prompt_length - 1 (the prompt's last token) predicts the first answer token.
    out.push_back({std::move(t.tokens), t.prompt_length - 1});
  }
  return out;
}

}  // namespace shrike::task
