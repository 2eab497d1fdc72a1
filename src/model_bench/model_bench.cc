#include "model_bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "model_bench/roofline.h"

namespace shrike::model_bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, int32_t(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

// Each step rewrites positions [context, context + N) of the same cache, as a verification
// whose drafts were rejected is rolled back and overwritten. A one-token step is always measured,
// as the baseline of the ratios.
std::vector<VerifyStepResult> verify_steps(const model::Model& m, ThreadPool& pool,
                                           const ModelBenchOptions& opt) {
  const auto& c = m.config();
  std::vector<int64_t> sizes{1};
  for (int64_t n : opt.verify_tokens)
    if (n > 1 && std::find(sizes.begin(), sizes.end(), n) == sizes.end()) sizes.push_back(n);
  const int64_t longest = *std::max_element(sizes.begin(), sizes.end());
  const int64_t context = std::clamp<int64_t>(opt.verify_context, 1, c.context_length - longest);
  const auto tokens = random_tokens(context + longest, c.vocab_size, 11);
  kv::ContiguousKvCache kv(c.kv_dims(), context + longest, opt.kv);
  std::vector<float> logits(size_t(longest * c.vocab_size));
  model::ForwardScratch scratch;  // grown by the longest step of the warm-up round
  m.forward(tokens.data(), context, 0, kv, 0, logits.data(), pool, scratch);
  std::vector<std::vector<double>> times(sizes.size());
  for (int r = 0; r < opt.repeats + 1; ++r)
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      m.forward(&tokens[size_t(context)], sizes[i], context, kv, sizes[i], logits.data(), pool,
                scratch);
      if (r > 0) times[i].push_back(seconds_since(t0));  // the first round warms up
    }
  std::vector<VerifyStepResult> out;
  const double one = median(times[0]);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double t = median(times[i]);
    out.push_back({sizes[i], t, t / one});
  }
  return out;
}

}  // namespace

ModelBenchResult run_model_bench(const model::Model& m, ThreadPool& pool,
                                 const ModelBenchOptions& opt) {
  const auto& c = m.config();
  ModelBenchResult out;
  out.threads = pool.size();
  out.decode_weight_bytes = m.decode_weight_bytes();
  std::vector<float> logits(size_t(c.vocab_size));
  model::ForwardScratch scratch;  // allocated by the warm-up calls, reused by the timed ones

  // Prefill: the whole prompt in one forward call on an empty cache, logits of the last token
  // only (as a server does).
  for (int64_t p : opt.prompt_lengths) {
    if (p <= 0) continue;  // -p 0: no prefill test, as llama-bench reads it
    const int64_t len = std::min(p, c.context_length);
    const auto tokens = random_tokens(len, c.vocab_size, 42);
    kv::ContiguousKvCache kv(c.kv_dims(), len, opt.kv);
    m.forward(tokens.data(), len, 0, kv, 1, logits.data(), pool, scratch);  // warm-up
    std::vector<double> rates;
    for (int r = 0; r < opt.repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      m.forward(tokens.data(), len, 0, kv, 1, logits.data(), pool, scratch);
      rates.push_back(double(len) / seconds_since(t0));
    }
    out.prefill.push_back({len, median(rates)});
  }

  // Decode: one token at a time from position 1 (after a one-token prompt), like llama-bench's
  // text-generation test. With the roofline, each round is preceded by a read-bandwidth probe, so
  // that both medians come from the same minutes of this (shared, noisy) machine.
  const int64_t n = std::min(opt.decode_tokens, c.context_length - 1);
  std::vector<double> rates, bandwidths;
  // Larger than every cache level, small enough to probe before each decode round.
  out.llc_bytes = last_level_cache_bytes();
  const size_t probe_bytes = bandwidth_probe_bytes(out.llc_bytes);
  out.probe_bytes = probe_bytes;
  if (n > 0) {
    const auto tokens = random_tokens(n + 1, c.vocab_size, 7);
    kv::ContiguousKvCache kv(c.kv_dims(), n + 1, opt.kv);
    for (int r = 0; r < opt.repeats + 1; ++r) {
      if (opt.roofline && r > 0)
        bandwidths.push_back(measure_read_bandwidth(pool, probe_bytes, 3).gb_per_s);
      m.forward(tokens.data(), 1, 0, kv, 1, logits.data(), pool, scratch);
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 1; i <= n; ++i)
        m.forward(&tokens[size_t(i)], 1, i, kv, 1, logits.data(), pool, scratch);
      if (r > 0) rates.push_back(double(n) / seconds_since(t0));  // first round warms up
    }
    out.decode_tok_per_s = median(rates);
    out.kv_bytes_per_token = kv.bytes_per_token();
    if (opt.op_profile) {
      // As many profiled rounds as timed ones; per operation the median of its per-round mean,
      // so that a round in which the machine preempted us does not decide the breakdown.
      std::vector<std::vector<double>> per_op(model::OpProfile::kCount);
      std::vector<double> steps;
      for (int r = 0; r < opt.repeats; ++r) {
        model::OpProfile profile;
        model::ForwardOptions fo;
        fo.profile = &profile;
        m.forward(tokens.data(), 1, 0, kv, 1, logits.data(), pool, scratch, fo);
        profile = {};
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 1; i <= n; ++i)
          m.forward(&tokens[size_t(i)], 1, i, kv, 1, logits.data(), pool, scratch, fo);
        steps.push_back(seconds_since(t0) / double(n) * 1e6);
        for (int op = 0; op < model::OpProfile::kCount; ++op)
          per_op[size_t(op)].push_back(profile.seconds[op] / double(n) * 1e6);
      }
      out.profiled_step_us = median(steps);
      double total = 0;
      std::vector<double> us(per_op.size());
      for (size_t op = 0; op < per_op.size(); ++op) total += us[op] = median(per_op[op]);
      for (size_t op = 0; op < per_op.size(); ++op)
        out.ops.push_back(
            {model::OpProfile::name(int(op)), us[op], total > 0 ? us[op] / total : 0});
    }
    out.decode_gb_per_s = out.decode_tok_per_s * double(out.decode_weight_bytes) / 1e9;
  }
  // Batched decode from position 1 of every sequence.
  for (int64_t b : opt.decode_batches) {
    if (b <= 0 || n <= 0) continue;
    std::vector<std::unique_ptr<kv::ContiguousKvCache>> kvs;
    std::vector<std::vector<int32_t>> tokens;
    for (int64_t s = 0; s < b; ++s) {
      kvs.push_back(std::make_unique<kv::ContiguousKvCache>(c.kv_dims(), n + 1, opt.kv));
      tokens.push_back(random_tokens(n + 1, c.vocab_size, uint32_t(100 + s)));
    }
    std::vector<float> batch_logits(size_t(b * c.vocab_size));
    std::vector<model::BatchSequence> seqs(static_cast<size_t>(b));
    auto step = [&](int64_t pos) {
      for (int64_t s = 0; s < b; ++s)
        seqs[size_t(s)] = {&tokens[size_t(s)][size_t(pos)], 1, pos, kvs[size_t(s)].get(), 1};
      m.forward_batch(seqs.data(), b, batch_logits.data(), pool, scratch);
    };
    std::vector<double> batch_rates;
    for (int r = 0; r < opt.repeats + 1; ++r) {
      step(0);
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 1; i <= n; ++i) step(i);
      if (r > 0) batch_rates.push_back(double(n * b) / seconds_since(t0));
    }
    out.batched.push_back({b, median(batch_rates)});
  }
  if (!opt.verify_tokens.empty()) out.verify = verify_steps(m, pool, opt);
  if (opt.roofline) {
    if (bandwidths.empty())
      bandwidths.push_back(measure_read_bandwidth(pool, probe_bytes, 3).gb_per_s);
    out.bandwidth_gb_per_s = median(bandwidths);
    out.roofline_fraction = out.decode_gb_per_s / out.bandwidth_gb_per_s;
  }
  return out;
}

}  // namespace shrike::model_bench
