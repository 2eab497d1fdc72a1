#include "train/task_eval.h"

#include <algorithm>

#include "kv/contiguous_kv.h"
#include "model/weight_binding.h"

namespace shrike::train {

TaskSequence encode_task(const tokenizer::Tokenizer& tok, const data::Example& ex) {
  TaskSequence s;
  s.tokens = encode_task_prompt(tok, ex.text);
  s.prompt_length = int64_t(s.tokens.size());
  std::vector<int32_t> answer = tok.encode(data::task_answer(ex), /*add_bos=*/false);
  answer.push_back(tok.eos());
  s.tokens.insert(s.tokens.end(), answer.begin(), answer.end());
  // Position t predicts token t + 1: the last prompt position predicts the first answer token.
  s.targets.assign(s.tokens.size(), -1);
  for (size_t t = size_t(s.prompt_length) - 1; t + 1 < s.tokens.size(); ++t)
    s.targets[t] = s.tokens[t + 1];
  return s;
}

tokenizer::BpeTrainOptions task_tokenizer_options(int32_t vocab_size) {
  tokenizer::BpeTrainOptions o;
  o.vocab_size = vocab_size;
  o.split_digits = true;
  o.split_space = true;
  o.split_cjk = true;
  return o;
}

tokenizer::Vocab train_task_tokenizer(const std::vector<data::Example>& examples,
                                      const tokenizer::BpeTrainOptions& opt) {
  std::vector<std::string> texts;
  texts.reserve(2 * examples.size());
  for (const data::Example& ex : examples) {
    texts.push_back(data::task_prompt(ex.text));
    texts.push_back(data::task_answer(ex));
  }
  return tokenizer::train_bpe(texts, opt);
}

std::unique_ptr<model::Model> to_inference_model(const Transformer<float>& t) {
  const std::vector<float>& p = t.params();
  const model::WeightSource src{
      [&](const std::string& name, int64_t rows, int64_t cols) {
        const ParamTensor& pt = t.tensor(name);
        return kernels::PackedMatrix::pack(DType::F32, rows, cols, p.data() + pt.offset);
      },
      [&](const std::string& name, int64_t n) {
        const ParamTensor& pt = t.tensor(name);
        return std::vector<float>(p.data() + pt.offset, p.data() + pt.offset + n);
      }};
  return std::make_unique<model::Model>(t.config(), model::bind_weights(t.config(), src));
}

std::vector<std::string> generate_answers(const model::Model& m, const tokenizer::Tokenizer& tok,
                                          const std::vector<data::Example>& examples,
                                          ThreadPool& pool, int64_t max_answer_tokens,
                                          int64_t batch, const model::KvCacheFactory& make_cache) {
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
      prompts[i] = encode_task_prompt(tok, examples[first + i].text);
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

std::vector<data::TaskPrediction> predict_task(const model::Model& m,
                                               const tokenizer::Tokenizer& tok,
                                               const std::vector<data::Example>& examples,
                                               ThreadPool& pool) {
  std::vector<data::TaskPrediction> out;
  for (const std::string& text : generate_answers(m, tok, examples, pool))
    out.push_back(data::parse_task_answer(text));
  return out;
}

}  // namespace shrike::train
