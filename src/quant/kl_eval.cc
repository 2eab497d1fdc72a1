#include "quant/kl_eval.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/file_buffer.h"
#include "core/jsonl.h"

namespace shrike::quant {
namespace {

int64_t scored_count(const ScoredSequence& s) {
  return std::max<int64_t>(0, int64_t(s.tokens.size()) - 1 - s.first_scored);
}

void validate(const model::ModelConfig& c, const std::vector<ScoredSequence>& seqs) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    const ScoredSequence& s = seqs[i];
    const int64_t n = int64_t(s.tokens.size());
    const std::string where = "sequence " + std::to_string(i) + ": ";
    if (s.first_scored < 0 || s.first_scored > std::max<int64_t>(0, n - 1))
      throw std::invalid_argument(where + "first scored position " +
                                  std::to_string(s.first_scored) + " outside [0, " +
                                  std::to_string(std::max<int64_t>(0, n - 1)) + "]");
    // The last token is only ever a target: n - 1 positions run through the model.
    if (n - 1 > c.context_length)
      throw std::invalid_argument(where + std::to_string(n) +
                                  " tokens do not fit the model's context of " +
                                  std::to_string(c.context_length) + " (+1 target)");
    for (const int32_t t : s.tokens)
      if (t < 0 || t >= c.vocab_size)
        throw std::invalid_argument(where + "token " + std::to_string(t) +
                                    " outside the vocabulary of " + std::to_string(c.vocab_size));
  }
}

int32_t first_argmax(const float* x, int64_t n) {
  return int32_t(std::max_element(x, x + n) - x);
}

// Runs the model over every sequence with something to score, several per forward_batch, and
// calls visit(logits_row, position_index, target, thread) for every scored position, spreading
// the rows of each pass over the pool. position_index numbers the scored positions of all
// sequences in order. Batching depends only on the sequences and the options, so two runs over
// the same sequences see the same passes (and, for one model, the same logits).
template <typename Visit>
void for_each_scored(const model::Model& m, const std::vector<ScoredSequence>& seqs,
                     ThreadPool& pool, const EvalOptions& opt, Visit&& visit) {
  const model::ModelConfig& c = m.config();
  validate(c, seqs);
  if (opt.scored_chunk < 0) throw std::invalid_argument("scored_chunk < 0");
  const int64_t vocab = c.vocab_size;
  std::vector<int64_t> first_index(seqs.size() + 1, 0);
  int64_t capacity = 1;
  for (size_t i = 0; i < seqs.size(); ++i) {
    first_index[i + 1] = first_index[i] + scored_count(seqs[i]);
    if (scored_count(seqs[i]) > 0)
      capacity = std::max<int64_t>(capacity, int64_t(seqs[i].tokens.size()) - 1);
  }
  // One cache per batch slot, reused batch after batch: a sequence starts at position 0, which
  // makes the cache forget what it held.
  std::vector<std::unique_ptr<kv::KvCache>> caches;
  auto cache = [&](size_t slot) -> kv::KvCache* {
    while (caches.size() <= slot)
      caches.push_back(opt.make_cache ? opt.make_cache(c, capacity)
                                      : std::make_unique<kv::ContiguousKvCache>(
                                            c.n_layers, capacity, c.n_kv_heads, c.head_dim));
    return caches[slot].get();
  };
  struct Member {
    size_t seq;
    int64_t done = 0;  // positions run so far
  };
  struct Row {
    int64_t logits_row, position;
    int32_t target;
  };
  std::vector<float> logits;
  std::vector<Member> members;
  std::vector<model::BatchSequence> pass;
  std::vector<Row> rows;
  size_t next = 0;
  while (true) {
    // The next batch of sequences, by tokens and by logits.
    members.clear();
    int64_t tokens = 0, n_logits = 0;
    for (; next < seqs.size(); ++next) {
      const ScoredSequence& s = seqs[next];
      const int64_t scored = scored_count(s);
      if (scored == 0) continue;
      const int64_t run = int64_t(s.tokens.size()) - 1;
      if (!members.empty() &&
          (tokens + run > opt.batch_tokens ||
           size_t(n_logits + scored) * size_t(vocab) * sizeof(float) > opt.batch_logits_bytes))
        break;
      members.push_back({next, 0});
      tokens += run;
      n_logits += scored;
    }
    if (members.empty()) break;
    // Passes until every member has run all its positions: the whole run at once, or the
    // unscored prefix with the first scored position, then scored_chunk positions per pass.
    while (true) {
      pass.clear();
      rows.clear();
      int64_t pass_logits = 0;
      for (size_t k = 0; k < members.size(); ++k) {
        Member& mb = members[k];
        const ScoredSequence& s = seqs[mb.seq];
        const int64_t run = int64_t(s.tokens.size()) - 1;
        if (mb.done == run) continue;
        int64_t n = run - mb.done;
        // A prompt's prefill ends with its first scored position (the prompt's last token,
        // whose logits predict the answer's first).
        if (opt.scored_chunk > 0)
          n = std::min<int64_t>(
              n, mb.done < s.first_scored ? s.first_scored + 1 - mb.done : opt.scored_chunk);
        // Scored positions in [done, done + n) are its last ones: [max(done, first), done + n).
        const int64_t from = std::max(mb.done, s.first_scored);
        const int64_t wanted = std::max<int64_t>(0, mb.done + n - from);
        model::BatchSequence b;
        b.tokens = s.tokens.data() + mb.done;
        b.n_tokens = n;
        b.pos0 = mb.done;
        b.kv = cache(k);
        b.n_logits = wanted;
        pass.push_back(b);
        for (int64_t r = 0; r < wanted; ++r) {
          const int64_t p = from + r;
          rows.push_back({pass_logits + r, first_index[mb.seq] + (p - s.first_scored),
                          s.tokens[size_t(p + 1)]});
        }
        pass_logits += wanted;
        mb.done += n;
      }
      if (pass.empty()) break;
      logits.resize(size_t(pass_logits) * size_t(vocab));
      m.forward_batch(pass.data(), int64_t(pass.size()), logits.data(), pool);
      pool.run([&](int t, int nt) {
        const size_t b = rows.size() * size_t(t) / size_t(nt);
        const size_t e = rows.size() * size_t(t + 1) / size_t(nt);
        for (size_t i = b; i < e; ++i)
          visit(logits.data() + size_t(rows[i].logits_row) * size_t(vocab), rows[i].position,
                rows[i].target, t);
      });
    }
  }
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw FileError(path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw FileError(path + ": read failed");
  return ss.str();
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

KvCacheFactory kv_cache_factory(const kv::KvCacheOptions& opt) {
  return [opt](const model::ModelConfig& c, int64_t capacity) {
    return std::make_unique<kv::ContiguousKvCache>(c.kv_dims(), capacity, opt);
  };
}

std::vector<ScoredSequence> all_positions(const std::vector<std::vector<int32_t>>& seqs) {
  std::vector<ScoredSequence> out;
  out.reserve(seqs.size());
  for (const auto& s : seqs) out.push_back({s, 0});
  return out;
}

void log_softmax(const float* logits, int64_t n, double* out) {
  if (n <= 0) return;
  const double max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - max);
  const double log_sum = std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[i] = (double(logits[i]) - max) - log_sum;
}

size_t RefDistributions::bytes() const {
  return probs.size() * sizeof(float) + target.size() * (sizeof(double) * 2 + sizeof(int32_t) * 2);
}

RefDistributions reference_distributions(const model::Model& ref, std::vector<ScoredSequence> seqs,
                                         ThreadPool& pool, const EvalOptions& opt) {
  validate(ref.config(), seqs);  // before allocating for them
  RefDistributions d;
  d.vocab_size = ref.config().vocab_size;
  d.seqs = std::move(seqs);
  int64_t n = 0;
  for (const ScoredSequence& s : d.seqs) n += scored_count(s);
  const size_t vocab = size_t(d.vocab_size);
  d.probs.resize(size_t(n) * vocab);
  d.sum_p_log_p.resize(size_t(n));
  d.argmax.resize(size_t(n));
  d.target.resize(size_t(n));
  d.nll.resize(size_t(n));
  std::vector<std::vector<double>> scratch(size_t(pool.size()), std::vector<double>(vocab));
  for_each_scored(ref, d.seqs, pool, opt,
                  [&](const float* logits, int64_t pos, int32_t target, int thread) {
                    double* lp = scratch[size_t(thread)].data();
                    log_softmax(logits, d.vocab_size, lp);
                    float* p = d.probs.data() + size_t(pos) * vocab;
                    // KL later sums p_i * (log p_i - log q_i) with p as stored here, so that a
                    // model compared with itself gets exactly 0.
                    double s = 0;
                    for (size_t i = 0; i < vocab; ++i) {
                      p[i] = float(std::exp(lp[i]));
                      s += double(p[i]) * lp[i];
                    }
                    d.sum_p_log_p[size_t(pos)] = s;
                    d.argmax[size_t(pos)] = first_argmax(logits, d.vocab_size);
                    d.target[size_t(pos)] = target;
                    d.nll[size_t(pos)] = -lp[target];
                  });
  return d;
}

void PositionScores::append(const PositionScores& o) {
  kl.insert(kl.end(), o.kl.begin(), o.kl.end());
  model_nll.insert(model_nll.end(), o.model_nll.begin(), o.model_nll.end());
  ref_nll.insert(ref_nll.end(), o.ref_nll.begin(), o.ref_nll.end());
  top1_agree.insert(top1_agree.end(), o.top1_agree.begin(), o.top1_agree.end());
}

PositionScores score_positions(const model::Model& m, const RefDistributions& ref, ThreadPool& pool,
                               const EvalOptions& opt) {
  if (m.config().vocab_size != ref.vocab_size)
    throw std::invalid_argument("vocabulary sizes differ: model " +
                                std::to_string(m.config().vocab_size) + ", reference " +
                                std::to_string(ref.vocab_size));
  const size_t n = size_t(ref.n_positions());
  const size_t vocab = size_t(ref.vocab_size);
  PositionScores s;
  s.kl.resize(n);
  s.model_nll.resize(n);
  s.ref_nll = ref.nll;
  s.top1_agree.resize(n);
  std::vector<std::vector<double>> scratch(size_t(pool.size()), std::vector<double>(vocab));
  for_each_scored(m, ref.seqs, pool, opt,
                  [&](const float* logits, int64_t pos, int32_t target, int thread) {
                    const size_t k = size_t(pos);
                    double* lq = scratch[size_t(thread)].data();
                    log_softmax(logits, ref.vocab_size, lq);
                    const float* p = ref.probs.data() + k * vocab;
                    double cross = 0;
                    for (size_t i = 0; i < vocab; ++i) cross += double(p[i]) * lq[i];
                    // Rounding can leave a hair below zero for near-identical distributions.
                    s.kl[k] = std::max(0.0, ref.sum_p_log_p[k] - cross);
                    s.model_nll[k] = -lq[target];
                    s.top1_agree[k] = first_argmax(logits, ref.vocab_size) == ref.argmax[k];
                  });
  return s;
}

KlStats summarize(const PositionScores& s) {
  KlStats k;
  k.n_positions = int64_t(s.kl.size());
  if (s.kl.empty()) return k;
  k.mean_kl = mean(s.kl);
  std::vector<double> sorted = s.kl;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const size_t rank = (99 * n + 99) / 100;  // ceil(0.99 n), in integers
  k.p99_kl = sorted[std::max<size_t>(rank, 1) - 1];
  k.max_kl = sorted.back();
  int64_t agree = 0;
  for (const uint8_t a : s.top1_agree) agree += a;
  k.top1_agreement = double(agree) / double(n);
  k.model_nll = mean(s.model_nll);
  k.ref_nll = mean(s.ref_nll);
  k.model_perplexity = std::exp(k.model_nll);
  k.ref_perplexity = std::exp(k.ref_nll);
  return k;
}

KlStats compare_to_reference(const model::Model& m, const RefDistributions& ref, ThreadPool& pool,
                             const EvalOptions& opt) {
  return summarize(score_positions(m, ref, pool, opt));
}

KlStats compare_models(const model::Model& m, const model::Model& ref,
                       const std::vector<ScoredSequence>& seqs, ThreadPool& pool,
                       const EvalOptions& opt, size_t max_ref_bytes) {
  if (m.config().vocab_size != ref.config().vocab_size)
    throw std::invalid_argument("vocabulary sizes differ: model " +
                                std::to_string(m.config().vocab_size) + ", reference " +
                                std::to_string(ref.config().vocab_size));
  validate(m.config(), seqs);
  validate(ref.config(), seqs);
  EvalOptions ref_opt = opt;
  ref_opt.make_cache = nullptr;
  const size_t row_bytes = size_t(ref.config().vocab_size) * sizeof(float);
  PositionScores all;
  size_t next = 0;
  while (next < seqs.size()) {
    std::vector<ScoredSequence> group;
    size_t bytes = 0;
    for (; next < seqs.size(); ++next) {
      const size_t b = size_t(scored_count(seqs[next])) * row_bytes;
      if (!group.empty() && bytes + b > max_ref_bytes) break;
      group.push_back(seqs[next]);
      bytes += b;
    }
    const RefDistributions d = reference_distributions(ref, std::move(group), pool, ref_opt);
    all.append(score_positions(m, d, pool, opt));
  }
  return summarize(all);
}

PerplexityStats perplexity(const model::Model& m, const std::vector<ScoredSequence>& seqs,
                           ThreadPool& pool, const EvalOptions& opt) {
  int64_t n = 0;
  for (const ScoredSequence& s : seqs) n += scored_count(s);
  std::vector<double> nll(size_t(std::max<int64_t>(n, 0)));
  const int64_t vocab = m.config().vocab_size;
  for_each_scored(m, seqs, pool, opt, [&](const float* logits, int64_t pos, int32_t target, int) {
    const double max = *std::max_element(logits, logits + vocab);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - max);
    nll[size_t(pos)] = std::log(sum) - (double(logits[target]) - max);
  });
  PerplexityStats p;
  p.n_positions = n;
  p.nll = mean(nll);
  p.perplexity = n > 0 ? std::exp(p.nll) : 0.0;
  return p;
}

std::vector<ScoredSequence> text_windows(const tokenizer::Tokenizer& tok, std::string_view text,
                                         int64_t ctx) {
  if (ctx < 2) throw std::invalid_argument("window of " + std::to_string(ctx) + " tokens (< 2)");
  const std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/false);
  const bool bos = tok.vocab().add_bos && tok.bos() >= 0;
  // Consecutive windows share one token (without BOS) or none (with BOS, which stands in for
  // it), so every token but a BOS-less text's first is predicted exactly once.
  const size_t step = size_t(ctx - 1);
  std::vector<ScoredSequence> out;
  for (size_t start = 0; start < ids.size(); start += step) {
    const size_t end = std::min(ids.size(), start + (bos ? step : step + 1));
    const size_t head = bos ? 1 : 0;
    ScoredSequence w;
    w.tokens.resize(head + end - start);
    if (bos) w.tokens[0] = tok.bos();
    std::copy(ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(end),
              w.tokens.begin() + ptrdiff_t(head));
    if (w.tokens.size() >= 2) out.push_back(std::move(w));
    if (end == ids.size()) break;
  }
  return out;
}

std::vector<std::string> read_text_documents(const std::string& path) {
  const std::string content = read_whole_file(path);
  std::vector<std::string> docs;
  if (std::filesystem::path(path).extension() == ".jsonl") {
    std::istringstream in(content);
    for_each_jsonl_object(in, path, [&](const nlohmann::json& j, const std::string& where) {
      const auto it = j.find("text");
      if (it == j.end()) throw FileError(where + "missing \"text\"");
      if (!it->is_string()) throw FileError(where + "\"text\" must be a string");
      std::string text = it->get<std::string>();
      if (!blank(text)) docs.push_back(std::move(text));
    });
  } else if (!blank(content)) {
    docs.push_back(content);
  }
  if (docs.empty()) throw FileError(path + ": no text");
  return docs;
}

std::vector<ScoredSequence> text_sequences(const tokenizer::Tokenizer& tok,
                                           const std::vector<std::string>& documents, int64_t ctx) {
  std::vector<ScoredSequence> out;
  for (const std::string& doc : documents) {
    std::vector<ScoredSequence> w = text_windows(tok, doc, ctx);
    out.insert(out.end(), std::make_move_iterator(w.begin()), std::make_move_iterator(w.end()));
  }
  return out;
}

}  // namespace shrike::quant
