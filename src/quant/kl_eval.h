// How far a model's next-token distributions are from a reference model's: KL(ref || model) per
// scored position (mean, P99, max), top-1 agreement and both perplexities on the actual next
// tokens. The reference's distributions are computed once (RefDistributions) so that a scan can
// compare thousands of candidate models (quantised variants of the reference) against them at the
// cost of the candidates' forward passes alone.
//
// A position t of a sequence predicts token t + 1. A sequence scores positions
// [first_scored, n - 1): all of them for text, only the answer's for a task example (as training
// puts its loss there).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace shrike::quant {

struct ScoredSequence {
  std::vector<int32_t> tokens;
  int64_t first_scored = 0;  // first position whose prediction of the next token counts
};

// Every position of every sequence scored.
std::vector<ScoredSequence> all_positions(const std::vector<std::vector<int32_t>>& seqs);

// Makes the cache a sequence's forward passes use (capacity: positions). The default is
// ContiguousKvCache (f32); a KV-quantisation experiment passes its own for the model under test.
using KvCacheFactory = model::KvCacheFactory;

// ContiguousKvCache with these options (type f32, f16, int8 or int8-mixed).
KvCacheFactory kv_cache_factory(const kv::KvCacheOptions& opt);

struct EvalOptions {
  // Sequences are run together through Model::forward_batch up to this many tokens per pass
  // (a longer sequence runs alone).
  int64_t batch_tokens = 2048;
  // And up to this many bytes of logits per pass (scored positions x vocabulary x 4); a
  // sequence whose own logits exceed it still runs, alone.
  size_t batch_logits_bytes = size_t(256) << 20;
  KvCacheFactory make_cache;  // empty: ContiguousKvCache
  // 0: each sequence runs in one forward call. k > 0: its unscored prefix and first scored
  // position in one call (a prompt's prefill), then the following positions k per call, as
  // decoding runs. An int8-mixed cache reads a call's own positions in f16 and decides what to
  // keep at each call with logits, so it must be measured with k = 1.
  int64_t scored_chunk = 0;
};

// The reference model's next-token distributions at every scored position, sequence by sequence.
// Memory: n_positions() x vocab_size x 4 bytes of probabilities.
struct RefDistributions {
  int64_t vocab_size = 0;
  std::vector<ScoredSequence> seqs;
  // Per scored position, in order:
  std::vector<float> probs;         // [position][vocab]: softmax of the reference's logits
  std::vector<double> sum_p_log_p;  // sum_i p_i log p_i (p as stored), so KL needs no log of p
  std::vector<int32_t> argmax;      // the reference's top token (first of equal maxima)
  std::vector<int32_t> target;      // the actual next token
  std::vector<double> nll;          // -log p(target)

  int64_t n_positions() const { return int64_t(target.size()); }
  size_t bytes() const;
};

// Runs the reference over the sequences. Throws std::invalid_argument when a sequence does not
// fit the model's context (tokens.size() - 1 positions are run), holds a token outside the
// vocabulary, or has first_scored outside [0, tokens.size() - 1]. A sequence with nothing to
// score (fewer than 2 tokens, or first_scored = tokens.size() - 1) is kept and contributes nothing.
RefDistributions reference_distributions(const model::Model& ref, std::vector<ScoredSequence> seqs,
                                         ThreadPool& pool, const EvalOptions& opt = {});

// Per scored position, in RefDistributions order.
struct PositionScores {
  std::vector<double> kl;         // KL(ref || model), nats, >= 0
  std::vector<double> model_nll;  // -log q(target)
  std::vector<double> ref_nll;    // -log p(target)
  std::vector<uint8_t> top1_agree;
  void append(const PositionScores& other);
};

struct KlStats {
  int64_t n_positions = 0;
  double mean_kl = 0, p99_kl = 0, max_kl = 0;       // nats per position
  double top1_agreement = 0;                        // fraction of positions with equal argmax
  double model_nll = 0, ref_nll = 0;                // mean nats per position on the actual tokens
  double model_perplexity = 0, ref_perplexity = 0;  // exp of those
};

// Runs the model over the reference's sequences and scores every position. Throws
// std::invalid_argument when the vocabularies differ in size, or as reference_distributions does.
PositionScores score_positions(const model::Model& m, const RefDistributions& ref, ThreadPool& pool,
                               const EvalOptions& opt = {});

// Means (double accumulation), P99 (nearest rank: the ceil(0.99 n)-th smallest) and max. Zeros
// when there are no positions.
KlStats summarize(const PositionScores& s);

// summarize(score_positions(...)): what a sensitivity scan calls per candidate.
KlStats compare_to_reference(const model::Model& m, const RefDistributions& ref, ThreadPool& pool,
                             const EvalOptions& opt = {});

// Both models over the same sequences without holding every reference distribution at once:
// the sequences go in groups of at most max_ref_bytes of reference probabilities. The reference
// runs with an f32 ContiguousKvCache whatever opt.make_cache says; the model with opt's.
KlStats compare_models(const model::Model& m, const model::Model& ref,
                       const std::vector<ScoredSequence>& seqs, ThreadPool& pool,
                       const EvalOptions& opt = {}, size_t max_ref_bytes = size_t(512) << 20);

struct PerplexityStats {
  int64_t n_positions = 0;
  double nll = 0;  // mean nats per position
  double perplexity = 0;
};

// One model's perplexity on the actual next tokens at the scored positions.
PerplexityStats perplexity(const model::Model& m, const std::vector<ScoredSequence>& seqs,
                           ThreadPool& pool, const EvalOptions& opt = {});

// ---- Building sequences ----

// One text tokenised (no BOS) and cut into windows of at most ctx tokens: each window starts
// with BOS when the tokenizer adds one (so every text token is predicted once, the first of a
// window from BOS alone), otherwise a window's first token is context only. Every position is
// scored; a final window with nothing to score is dropped. Throws std::invalid_argument for
// ctx < 2.
std::vector<ScoredSequence> text_windows(const tokenizer::Tokenizer& tok, std::string_view text,
                                         int64_t ctx);

// The documents of a text file: a .jsonl file (by name) holds one JSON object per line with a
// string "text" (blank lines skipped), anything else is one plain-text document. Throws FileError
// "PATH: ..." ("PATH:LINE: ..." for a bad line) when the file cannot be read, a line is not JSON
// or lacks "text", or there is no text at all.
std::vector<std::string> read_text_documents(const std::string& path);

// Every document's windows (text_windows), in order.
std::vector<ScoredSequence> text_sequences(const tokenizer::Tokenizer& tok,
                                           const std::vector<std::string>& documents, int64_t ctx);

// ---- Exposed for tests ----

// Stable log-softmax in double: out[i] = x[i] - max - log(sum exp(x - max)).
void log_softmax(const float* logits, int64_t n, double* out);

}  // namespace shrike::quant
