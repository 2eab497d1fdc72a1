// trim_compare FULL.gguf TRIMMED.gguf EXAMPLES.jsonl [THREADS]: greedy task answers of a model
// trimmed by `shrike trim-vocab` against the full model's greedy answers under a mask of the kept
// ids (shrike.vocab_trim.source_ids). The full model reads each prompt twice: tokenized by its own
// vocabulary (text the trimming never saw may then use tokens the trimmed model lacks, so the two
// models read different inputs), and tokenized by the trimmed vocabulary with the ids mapped
// back (the full model restricted to the kept tokens on input and output, which the trimmed
// model must match exactly). Prints how many answers are the same text (and the same tokens,
// mapped back) in each case, and intent accuracies. An experiment tool for issue 15's acceptance
// 4: exit code 0 when every answer of the restricted full model is the trimmed model's.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "data/example.h"
#include "decode/token_mask.h"
#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "model/vocab_trim.h"
#include "task/task_format.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace shrike;

// Greedy answers (token ids, EOS excluded) to every prompt, batched through forward_batch as
// task::generate_answers does; `allowed` (when set) masks the logits before the argmax.
std::vector<std::vector<int32_t>> greedy_answers(const model::Model& m, int32_t eos,
                                                 std::vector<std::vector<int32_t>> all_prompts,
                                                 const decode::TokenBitset* allowed,
                                                 ThreadPool& pool) {
  constexpr int64_t kMaxAnswer = 96, kBatch = 64;
  const model::ModelConfig& c = m.config();
  std::vector<std::vector<int32_t>> out(all_prompts.size());
  std::vector<float> logits;
  model::ForwardScratch scratch;
  for (size_t first = 0; first < all_prompts.size(); first += kBatch) {
    const size_t n = std::min(all_prompts.size() - first, size_t(kBatch));
    std::vector<std::vector<int32_t>> prompts(n);
    std::vector<std::unique_ptr<kv::ContiguousKvCache>> caches(n);
    std::vector<int32_t> next(n);
    std::vector<bool> done(n, false);
    for (size_t i = 0; i < n; ++i) {
      prompts[i] = std::move(all_prompts[first + i]);
      const int64_t cap =
          std::min<int64_t>(c.context_length, int64_t(prompts[i].size()) + kMaxAnswer);
      if (int64_t(prompts[i].size()) >= cap) prompts[i].resize(size_t(cap - 1));
      caches[i] =
          std::make_unique<kv::ContiguousKvCache>(c.n_layers, cap, c.n_kv_heads, c.head_dim);
    }
    for (int64_t step = 0;; ++step) {
      std::vector<model::BatchSequence> seqs;
      std::vector<size_t> members;
      for (size_t i = 0; i < n; ++i) {
        if (done[i]) continue;
        std::vector<int32_t>& answer = out[first + i];
        model::BatchSequence s;
        s.tokens = step == 0 ? prompts[i].data() : &next[i];
        s.n_tokens = step == 0 ? int64_t(prompts[i].size()) : 1;
        s.pos0 = step == 0 ? 0 : int64_t(prompts[i].size() + answer.size()) - 1;
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
        std::vector<int32_t>& answer = out[first + i];
        float* row = logits.data() + j * size_t(c.vocab_size);
        if (allowed) decode::apply_token_mask(row, c.vocab_size, *allowed);
        const auto best = int32_t(std::max_element(row, row + c.vocab_size) - row);
        if (best == eos) {
          done[i] = true;
          continue;
        }
        answer.push_back(best);
        next[i] = best;
        const int64_t len = int64_t(prompts[i].size() + answer.size());
        if (int64_t(answer.size()) >= kMaxAnswer || len + 1 >= caches[i]->capacity())
          done[i] = true;
      }
    }
  }
  return out;
}

int run(const std::string& full_path, const std::string& trim_path, const std::string& data_path,
        int threads) {
  const gguf::GgufFile tf = gguf::GgufFile::open(trim_path);
  const std::vector<int64_t> source = tf.get_int_array(model::kTrimSourceIdsKey);
  const tokenizer::Tokenizer full_tok(tokenizer::vocab_from_gguf(gguf::GgufFile::open(full_path)));
  const tokenizer::Tokenizer trim_tok(tokenizer::vocab_from_gguf(tf));
  const auto full = model::load_model(full_path);
  const auto trimmed = model::load_model(trim_path);
  decode::TokenBitset allowed(full_tok.n_vocab());
  for (int64_t id : source) allowed.set(id);
  const std::vector<data::Example> examples = data::read_examples(data_path);
  ThreadPool pool(threads);

  std::vector<std::vector<int32_t>> own_prompts, trimmed_prompts, mapped_prompts;
  for (const data::Example& ex : examples) {
    const std::string prompt = task::task_prompt(ex.text);
    own_prompts.push_back(full_tok.encode(prompt, true));
    trimmed_prompts.push_back(trim_tok.encode(prompt, true));
    mapped_prompts.emplace_back();
    for (int32_t id : trimmed_prompts.back())
      mapped_prompts.back().push_back(int32_t(source[size_t(id)]));
  }
  const auto b = greedy_answers(*trimmed, trim_tok.eos(), trimmed_prompts, nullptr, pool);
  const auto n = int64_t(examples.size());
  int64_t correct_trim = 0, prompts_differ = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    correct_trim += task::parse_task_answer(trim_tok.decode(b[i])).intent == examples[i].intent;
    prompts_differ += own_prompts[i] != mapped_prompts[i];
  }
  std::printf(
      "%s: %lld examples, %lld prompts tokenized differently by the trimmed vocabulary; "
      "vocabulary %d -> %d; trimmed model intent accuracy %.4f\n",
      data_path.c_str(), (long long)n, (long long)prompts_differ, full_tok.n_vocab(),
      trim_tok.n_vocab(), double(correct_trim) / double(n));
  bool all_same = false;
  for (const bool restricted : {false, true}) {
    const auto a = greedy_answers(*full, full_tok.eos(), restricted ? mapped_prompts : own_prompts,
                                  &allowed, pool);
    int64_t same_text = 0, same_tokens = 0, correct_full = 0, shown = 0;
    for (size_t i = 0; i < examples.size(); ++i) {
      std::vector<int32_t> mapped;
      for (int32_t id : b[i]) mapped.push_back(int32_t(source[size_t(id)]));
      same_tokens += mapped == a[i];
      const std::string ta = full_tok.decode(a[i]), tb = trim_tok.decode(b[i]);
      same_text += ta == tb;
      if (ta != tb && ++shown <= 3)
        std::fprintf(stderr, "differs: %s\n  full: %s\n  trim: %s\n", examples[i].text.c_str(),
                     ta.c_str(), tb.c_str());
      correct_full += task::parse_task_answer(ta).intent == examples[i].intent;
    }
    std::printf(
        "  full model, output masked to the kept ids, prompts tokenized by the %s "
        "vocabulary: same answer text %lld/%lld, same tokens %lld/%lld; intent accuracy "
        "%.4f\n",
        restricted ? "trimmed" : "full", (long long)same_text, (long long)n, (long long)same_tokens,
        (long long)n, double(correct_full) / double(n));
    if (restricted) all_same = same_text == n && same_tokens == n;
  }
  return all_same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: trim_compare FULL.gguf TRIMMED.gguf EXAMPLES.jsonl [THREADS]\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2], argv[3], argc == 5 ? std::stoi(argv[4]) : 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trim_compare: %s\n", e.what());
    return 2;
  }
}
