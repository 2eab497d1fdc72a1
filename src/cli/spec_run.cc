#include "cli/spec_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "cli/model_files.h"

namespace shrike::cli {
namespace {

using engine::Clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Input-grounded prompts: the answer copies from the input, where prompt lookup pays.
const std::vector<std::string>& builtin_prompts() {
  static const std::vector<std::string> p{
      "Repeat the sentence. Sentence: Once upon a time, there was a little girl named Lily. She "
      "loved to play outside in the park with her big red ball. Repeat: Once upon a time, there "
      "was a little girl named Lily. She loved to play outside in the park with her big red ball. "
      "Repeat: Once upon a time,",
      "Extract the names. Text: Tom and his friend Sam went to the park. Tom had a big kite and "
      "Sam had a small boat. Names: Tom, Sam. Text: Tom and his friend Sam went to the park. Tom "
      "had a big kite and Sam had a small boat. Names:",
      "Copy the list: apples, bananas, cherries, dates, figs, grapes, lemons, mangoes. Copy: "
      "apples, bananas, cherries, dates, figs, grapes, lemons, mangoes. Copy: apples,",
      "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the "
      "log. The cat sat on the mat. The dog"};
  return p;
}

struct Side {
  std::vector<double> tok_s, latency;
  int64_t generated = 0;
};

}  // namespace

engine::EngineConfig single_stream_config(int threads, const engine::SpeculativeConfig& spec) {
  engine::EngineConfig c;
  c.threads = threads;
  c.scheduler.max_seqs = 1;
  c.scheduler.prefix_caching = false;
  c.spec = spec;
  return c;
}

EngineRun run_one(engine::Engine& e, engine::GenerationRequest req,
                  const std::function<void(const std::string&)>& on_text) {
  EngineRun run;
  const auto t0 = Clock::now();
  engine::SubmitResult s = e.submit(std::move(req));
  if (s.status != engine::SubmitStatus::Accepted) throw std::invalid_argument(s.message);
  engine::StreamEvent ev;
  for (;;) {
    if (!s.stream->next(ev, std::chrono::milliseconds(1000))) continue;
    const double at = std::chrono::duration<double>(Clock::now() - t0).count();
    if (run.tokens.empty() && !ev.tokens.empty()) run.first_token_seconds = at;
    run.tokens.insert(run.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    run.text += ev.text;
    if (on_text && !ev.text.empty()) on_text(ev.text);
    if (ev.finished) {
      run.seconds = at;
      run.reason = ev.finish_reason;
      run.proposed = ev.spec_proposed;
      run.accepted = ev.spec_accepted;
      if (ev.finish_reason == engine::FinishReason::Error) throw std::runtime_error(ev.error);
      return run;
    }
  }
}

int run_spec_bench(const model::Model& m, const SpecArgs& spec, const SpecBenchOptions& o) {
  const auto tok = load_tokenizer(o.model_path, "", m.config().vocab_size);
  std::unique_ptr<model::Model> draft;
  const engine::SpeculativeConfig on_cfg = resolve_spec_options(spec, m, draft);
  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  // Both sides decode with the same products (speculation forces batch invariance for float
  // weights), so the comparison is of speculation alone.
  engine::EngineConfig off = single_stream_config(threads, {});
  off.batch_invariant = engine::needs_batch_invariance(m) && on_cfg.enabled();
  engine::Engine e_off(m, *tok, off);
  engine::Engine e_on(m, *tok, single_stream_config(threads, on_cfg));
  const std::vector<std::string>& prompts = o.prompts.empty() ? builtin_prompts() : o.prompts;
  Side s_off, s_on;
  int mismatches = 0;
  for (int r = 0; r < o.repeats; ++r)
    for (const std::string& p : prompts) {
      engine::GenerationRequest req;
      req.prompt = tok->encode(p, o.bos || m.config().add_bos);
      req.max_tokens = o.n;
      std::vector<int32_t> off_tokens;
      for (auto* side : {&s_off, &s_on}) {  // interleaved
        const EngineRun run = run_one(side == &s_off ? e_off : e_on, req);
        const double decode_s = run.seconds - run.first_token_seconds;
        if (run.tokens.size() > 1 && decode_s > 0)
          side->tok_s.push_back(double(run.tokens.size() - 1) / decode_s);
        side->latency.push_back(run.seconds);
        side->generated += int64_t(run.tokens.size());
        if (side == &s_off)
          off_tokens = run.tokens;
        else if (run.tokens != off_tokens)  // greedy: the same tokens either way
          ++mismatches;
      }
    }
  if (mismatches > 0)
    std::fprintf(stderr, "bench --spec: %d outputs differ from non-speculative greedy\n",
                 mismatches);
  auto& mt = e_on.metrics();
  const double proposed = double(mt.spec_proposed.load()),
               accepted = double(mt.spec_accepted.load());
  const double steps = double(mt.spec_steps.load());
  const double draft_s = double(mt.spec_draft_ns.load()) * 1e-9;
  const double fwd_s = double(mt.forward_ns.load()) * 1e-9;
  const double acc = proposed > 0 ? accepted / proposed : 0;
  const double per_step = steps > 0 ? accepted / steps : 0;
  const double share = draft_s + fwd_s > 0 ? draft_s / (draft_s + fwd_s) : 0;
  const double tok_off = median(s_off.tok_s), tok_on = median(s_on.tok_s);
  const double lat_off = median(s_off.latency), lat_on = median(s_on.latency);
  if (o.json) {
    nlohmann::json j;
    j["spec"] = spec.mode;
    j["spec_k"] = spec.k;
    j["threads"] = threads;
    j["prompts"] = prompts.size();
    j["repeats"] = o.repeats;
    j["off"] = {{"decode_tok_s", tok_off}, {"latency_s", lat_off}};
    j["on"] = {{"decode_tok_s", tok_on}, {"latency_s", lat_on}};
    j["speedup"] = tok_off > 0 ? tok_on / tok_off : 0;
    j["acceptance_rate"] = acc;
    j["mean_accepted_per_step"] = per_step;
    j["draft_time_share"] = share;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "speculative decoding: %s, k <= %d, %d threads, %zu prompts x %d repeats, %lld "
      "tokens each (medians, interleaved)\n",
      spec.mode.c_str(), spec.k, threads, prompts.size(), o.repeats, (long long)o.n);
  std::printf("  off: %8.1f tok/s decode, %8.1f ms per answer\n", tok_off, lat_off * 1e3);
  std::printf("  on:  %8.1f tok/s decode, %8.1f ms per answer  (%.2fx tok/s, %.2fx latency)\n",
              tok_on, lat_on * 1e3, tok_off > 0 ? tok_on / tok_off : 0,
              lat_on > 0 ? lat_off / lat_on : 0);
  std::printf(
      "  acceptance %.1f%%, %.2f accepted tokens per verification step, draft time "
      "%.1f%% of drafting + target passes\n",
      100 * acc, per_step, 100 * share);
  return 0;
}

}  // namespace shrike::cli
