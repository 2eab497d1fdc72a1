#include "task/task_eval.h"

#include <algorithm>

#include "kv/contiguous_kv.h"

namespace shrike::task {

tokenizer::BpeTrainOptions task_tokenizer_options(int32_t vocab_size, int32_t max_merges) {
  tokenizer::BpeTrainOptions o;
  o.vocab_size = vocab_size;
  o.max_merges = max_merges;
  o.split_digits = true;
  o.split_space = true;
  o.split_cjk = true;
  return o;
}

std::vector<std::string> task_tokenizer_texts(const std::vector<data::Example>& examples) {
  std::vector<std::string> texts;
  texts.reserve(2 * examples.size());
  for (const data::Example& ex : examples) {
    texts.push_back(task::task_prompt(ex.text));
    texts.push_back(task::task_answer(ex));
  }
  return texts;
}

tokenizer::Vocab train_task_tokenizer(const std::vector<data::Example>& examples,
                                      const tokenizer::BpeTrainOptions& opt) {
  return tokenizer::train_bpe(task_tokenizer_texts(examples), opt);
}

std::vector<std::string> generate_answers(const model::Model& m, const tokenizer::Tokenizer& tok,
                                          const std::vector<data::Example>& examples,
                                          ThreadPool& pool, int64_t max_answer_tokens,
                                          int64_t batch, const model::KvCacheFactory& make_cache,
                                          const PromptFormat& format) {
  const model::ModelConfig& c = m.config();
  std::vector<std::string> out(examples.size());
  std::vector<float> logits;
  model::ForwardScratch scratch;
  for (size_t first = 0; first < examples.size(); first += size_t(batch)) {
    const size_t n = std::min(examples.size() - first, size_t(batch));
    std::vector<std::vector<int32_t>> prompts(n), answers(n);
    std::vector<std::unique_ptr<kv::KvCache>> caches(n);
    std::vector<int32_t> next(n);
    std::vector<bool> done(n, false);
    for (size_t i = 0; i < n; ++i) {
      prompts[i] = encode_task_prompt(tok, examples[first + i].text, format);
      const int64_t cap =
          std::min<int64_t>(c.context_length, int64_t(prompts[i].size()) + max_answer_tokens);
      if (int64_t(prompts[i].size()) >= cap) prompts[i].resize(size_t(cap - 1));
      caches[i] = make_cache ? make_cache(c, cap)
                             : std::make_unique<kv::ContiguousKvCache>(c.n_layers, cap,
                                                                       c.n_kv_heads, c.head_dim);
    }
    // Step 0 prefills every prompt; later steps feed each live sequence its last token.
    for (int64_t step = 0;; ++step) {
      std::vector<model::BatchSequence> seqs;
      std::vector<size_t> members;
      for (size_t i = 0; i < n; ++i) {
        if (done[i]) continue;
        model::BatchSequence s;
        if (step == 0) {
          s.tokens = prompts[i].data();
          s.n_tokens = int64_t(prompts[i].size());
          s.pos0 = 0;
        } else {
          s.tokens = &next[i];
          s.n_tokens = 1;
          s.pos0 = int64_t(prompts[i].size() + answers[i].size()) - 1;
        }
        s.kv = caches[i].get();
        s.n_logits = 1;
        seqs.push_back(s);
        members.push_back(i);
      }
      if (seqs.empty()) break;
      logits.resize(seqs.size() * size_t(c.vocab_size));
      m.forward_batch(seqs.data(), int64_t(seqs.size()), logits.data(), pool, scratch);
      for (size_t j = 0; j < members.size(); ++j) {
        const size_t i = members[j];
        const float* row = logits.data() + j * size_t(c.vocab_size);
        const int32_t best = int32_t(std::max_element(row, row + c.vocab_size) - row);
        const bool full =
            int64_t(prompts[i].size() + answers[i].size()) + 1 >= caches[i]->capacity();
        if (best == tok.eos()) {
          done[i] = true;
          continue;
        }
        answers[i].push_back(best);
        next[i] = best;
        if (int64_t(answers[i].size()) >= max_answer_tokens || full) done[i] = true;
      }
    }
    for (size_t i = 0; i < n; ++i) out[first + i] = tok.decode(answers[i]);
  }
  return out;
}

std::vector<task::TaskPrediction> predict_task(const model::Model& m,
                                               const tokenizer::Tokenizer& tok,
                                               const std::vector<data::Example>& examples,
                                               ThreadPool& pool, const PromptFormat& format) {
  std::vector<task::TaskPrediction> out;
  for (const std::string& text : generate_answers(m, tok, examples, pool, 96, 64, {}, format))
    out.push_back(task::parse_task_answer(text));
  return out;
}

}  // namespace shrike::task
