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

namespace {

struct BenchSide {
  std::string label;
  std::unique_ptr<model::Model> draft;
  std::unique_ptr<engine::Engine> engine;
  std::vector<double> tok_s, latency;
  int mismatches = 0;
  int mismatches_loaded = 0;  // under load (SpecBenchOptions::concurrency)
  int64_t blocks_left = 0;    // KV blocks in use after the loaded pass
};

// The loaded pass: all prompts `concurrency` at a time through a fresh engine of the side's
// settings with room for them; counts answers that differ from `reference`.
void loaded_pass(BenchSide& side, const model::Model& m, const tokenizer::Tokenizer& tok,
                 const std::vector<engine::GenerationRequest>& reqs,
                 const std::vector<std::vector<int32_t>>& reference, int concurrency) {
  engine::EngineConfig c = side.engine->config();
  c.scheduler.max_seqs = concurrency;
  c.scheduler.prefix_caching = true;
  c.kv_blocks = 0;  // enough for max_seqs sequences (within kv_cache_bytes)
  engine::Engine e(m, tok, c);
  for (size_t from = 0; from < reqs.size(); from += size_t(concurrency)) {
    const size_t to = std::min(reqs.size(), from + size_t(concurrency));
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (size_t i = from; i < to; ++i) {
      engine::SubmitResult s = e.submit(reqs[i]);
      if (s.status != engine::SubmitStatus::Accepted) throw std::invalid_argument(s.message);
      streams.push_back(std::move(s.stream));
    }
    for (size_t i = from; i < to; ++i) {
      std::vector<int32_t> tokens;
      engine::StreamEvent ev;
      while (!ev.finished)
        if (streams[i - from]->next(ev, std::chrono::milliseconds(1000)))
          tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finish_reason == engine::FinishReason::Error) throw std::runtime_error(ev.error);
      if (tokens != reference[i]) ++side.mismatches_loaded;
    }
  }
  // A finished request's blocks go back before its final event: none may be left now.
  side.blocks_left = e.gauges().kv_blocks_used;
}

std::vector<std::string> split_modes(const std::string& s) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t comma; (comma = s.find(',', from)) != std::string::npos; from = comma + 1)
    out.push_back(s.substr(from, comma - from));
  out.push_back(s.substr(from));
  return out;
}

// The sides of the comparison: plain greedy ("off"; for float weights with the batch-invariant
// products speculation uses, and "off-fast" with the fast one-token kernel too), then each mode.
std::vector<BenchSide> bench_sides(const model::Model& m, const tokenizer::Tokenizer& tok,
                                   const SpecArgs& spec, int threads) {
  std::vector<BenchSide> sides;
  const bool invariant = engine::needs_batch_invariance(m);
  auto add = [&](std::string label, engine::SpeculativeConfig cfg, bool inv,
                 std::unique_ptr<model::Model> draft) {
    engine::EngineConfig c = single_stream_config(threads, cfg);
    c.batch_invariant = inv;
    BenchSide side;
    side.label = std::move(label);
    side.draft = std::move(draft);
    side.engine = std::make_unique<engine::Engine>(m, tok, c);
    sides.push_back(std::move(side));
  };
  add("off", {}, invariant, nullptr);
  if (invariant) add("off-fast", {}, false, nullptr);
  for (const std::string& mode : split_modes(spec.mode)) {
    SpecArgs one = spec;
    one.mode = mode;
    if (mode != "draft") one.draft.clear();
    std::unique_ptr<model::Model> draft;
    const engine::SpeculativeConfig cfg = resolve_spec_options(one, m, draft);
    if (cfg.enabled()) add(mode, cfg, invariant, std::move(draft));
  }
  return sides;
}

}  // namespace

int run_spec_bench(const model::Model& m, const SpecArgs& spec, const SpecBenchOptions& o) {
  const auto tok = load_tokenizer(o.model_path, "", m.config().vocab_size);
  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  std::vector<BenchSide> sides = bench_sides(m, *tok, spec, threads);
  const std::vector<std::string>& prompts = o.prompts.empty() ? builtin_prompts() : o.prompts;
  std::vector<engine::GenerationRequest> reqs;
  for (const std::string& p : prompts) {
    engine::GenerationRequest req;
    req.prompt = tok->encode(p, o.bos || m.config().add_bos);
    req.max_tokens = o.n;
    req.constraint = o.constraint;
    reqs.push_back(std::move(req));
  }
  std::vector<std::vector<int32_t>> references(reqs.size());  // plain greedy, alone
  for (int r = 0; r < o.repeats; ++r)
    for (size_t i = 0; i < reqs.size(); ++i) {
      const engine::GenerationRequest& req = reqs[i];
      std::vector<int32_t>& reference = references[i];
      for (BenchSide& side : sides) {  // interleaved: every side on this prompt, in turn
        const EngineRun run = run_one(*side.engine, req);
        const double decode_s = run.seconds - run.first_token_seconds;
        if (run.tokens.size() > 1 && decode_s > 0)
          side.tok_s.push_back(double(run.tokens.size() - 1) / decode_s);
        side.latency.push_back(run.seconds);
        if (&side == &sides.front() && r == 0)
          reference = run.tokens;
        else if (run.tokens != reference)  // greedy: the same tokens either way
          ++side.mismatches;
      }
    }
  if (o.concurrency > 0)
    for (BenchSide& side : sides) loaded_pass(side, m, *tok, reqs, references, o.concurrency);
  const double tok0 = median(sides.front().tok_s), lat0 = median(sides.front().latency);
  nlohmann::json j;
  j["threads"] = threads;
  j["prompts"] = prompts.size();
  j["repeats"] = o.repeats;
  j["max_tokens"] = o.n;
  j["spec_k"] = spec.k;
  j["constrained"] = o.constraint != nullptr;
  j["concurrency"] = o.concurrency;
  if (!o.json)
    std::printf(
        "speculative decoding: %d threads, %zu prompts x %d repeats, up to %lld tokens, "
        "k <= %d (medians, interleaved)\n"
        "%s| side | decode tok/s | answer ms | tok/s vs off | latency vs off | model ms | "
        "model time vs off | acceptance | accepted/step | draft time | differs |%s\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s\n",
        threads, prompts.size(), o.repeats, (long long)o.n, spec.k,
        o.constraint ? "answers constrained to the task's schema (jump-forward on)\n" : "",
        o.concurrency > 0 ? " differs under load | blocks left |" : "",
        o.concurrency > 0 ? "---:|---:|" : "");
  // Model time per answer: the side's forward passes and drafting, summed over its answers and
  // divided by their number. Unlike wall time it leaves out the engine's thread hand-offs, which
  // on a loaded machine can cost more than a small model's whole answer.
  const double answers = double(std::max<size_t>(1, reqs.size() * size_t(o.repeats)));
  const auto model_s = [&](const BenchSide& side) {
    const auto& mt = side.engine->metrics();
    return double(mt.forward_ns.load() + mt.spec_draft_ns.load()) * 1e-9 / answers;
  };
  const double model0 = model_s(sides.front());
  for (const BenchSide& side : sides) {
    const auto& mt = side.engine->metrics();
    const double proposed = double(mt.spec_proposed.load());
    const double accepted = double(mt.spec_accepted.load());
    const double steps = double(mt.spec_steps.load());
    const double draft_s = double(mt.spec_draft_ns.load()) * 1e-9;
    const double fwd_s = double(mt.forward_ns.load()) * 1e-9;
    const double acc = proposed > 0 ? accepted / proposed : 0;
    const double per_step = steps > 0 ? accepted / steps : 0;
    const double share = draft_s + fwd_s > 0 ? draft_s / (draft_s + fwd_s) : 0;
    const double tok = median(side.tok_s), lat = median(side.latency);
    const double speed = tok0 > 0 ? tok / tok0 : 0, faster = lat > 0 ? lat0 / lat : 0;
    const double model = model_s(side), model_faster = model > 0 ? model0 / model : 0;
    j["sides"].push_back({{"side", side.label},
                          {"decode_tok_s", tok},
                          {"latency_s", lat},
                          {"tok_s_ratio", speed},
                          {"latency_speedup", faster},
                          {"model_s_per_answer", model},
                          {"model_time_speedup", model_faster},
                          {"acceptance_rate", acc},
                          {"mean_accepted_per_step", per_step},
                          {"draft_time_share", share},
                          {"differs", side.mismatches}});
    if (o.concurrency > 0) {
      j["sides"].back()["differs_under_load"] = side.mismatches_loaded;
      j["sides"].back()["blocks_left"] = side.blocks_left;
    }
    if (!o.json) {
      std::printf(
          "| %s | %.1f | %.2f | %.2fx | %.2fx | %.2f | %.2fx | %.1f%% | %.2f | %.1f%% | %d |",
          side.label.c_str(), tok, lat * 1e3, speed, faster, model * 1e3, model_faster, 100 * acc,
          per_step, 100 * share, side.mismatches);
      if (o.concurrency > 0)
        std::printf(" %d | %lld |", side.mismatches_loaded, (long long)side.blocks_left);
      std::printf("\n");
    }
  }
  if (o.json) std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace shrike::cli
