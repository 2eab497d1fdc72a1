// `shrike generate`: prompt in, text (or token ids) streamed out, speeds on stderr.
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/generate_constrained.h"
#include "cli/kernel_options.h"
#include "cli/kv_options.h"
#include "cli/model_files.h"
#include "cli/spec_run.h"
#include "core/thread_pool.h"
#include "decode/sampler.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "tokenizer/stream.h"

namespace shrike::cli {
namespace {

struct GenerateArgs {
  std::string model, tokenizer, prompt;
  int64_t n = 128;
  decode::SamplerParams sampling;
  int threads = 0;
  bool ids = false, bf16_dot = false;
  ConstraintArgs constraint;
  KvCacheArgs kv_args{"f32", {}};
  kv::KvCacheOptions kv;
  SpecArgs spec;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// With speculation: the request goes through the serving engine (one sequence), which proposes,
// verifies and rolls back; the text streams as the engine emits it.
int run_generate_speculative(const GenerateArgs& a, const model::Model& model,
                             const tokenizer::Tokenizer& tok) {
  std::unique_ptr<model::Model> draft;
  const engine::SpeculativeConfig spec = resolve_spec_options(a.spec, model, draft);
  engine::EngineConfig ec = single_stream_config(a.threads, spec);
  ec.kv = a.kv;
  engine::Engine e(model, tok, ec);
  engine::GenerationRequest req;
  req.prompt = tok.encode(a.prompt, model.config().add_bos);
  if (req.prompt.empty()) req.prompt.push_back(model.config().bos_id);
  req.max_tokens = std::max<int64_t>(1, a.n);
  req.sampling = a.sampling;
  const EngineRun run = run_one(e, req, [&](const std::string& text) {
    if (a.ids) return;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  for (size_t i = 0; a.ids && i < run.tokens.size(); ++i)
    std::printf(i > 0 ? " %d" : "%d", run.tokens[i]);
  std::printf("\n");
  const double decode_s = run.seconds - run.first_token_seconds;
  std::fprintf(stderr,
               "decode: %zu tokens, %.1f tok/s after the first | speculative %s: %lld of %lld "
               "drafts accepted\n",
               run.tokens.size(),
               run.tokens.size() > 1 ? double(run.tokens.size() - 1) / decode_s : 0.0,
               a.spec.mode.c_str(), (long long)run.accepted, (long long)run.proposed);
  return 0;
}

int run_generate(GenerateArgs a) {
  resolve_kv_cache_options(a.kv_args, a.kv);
  apply_bf16_dot(a.bf16_dot);
  auto model = model::load_model(a.model);
  const auto tok = load_tokenizer(a.model, a.tokenizer, model->config().vocab_size);
  // Speculation: through the engine; a constrained request speculates under its constraint
  // (engine/speculation.h) in run_constrained.
  std::unique_ptr<model::Model> draft;
  engine::SpeculativeConfig speculation;
  if (a.spec.mode != "off") {
    if (!constraint_spec(a.constraint)) return run_generate_speculative(a, *model, *tok);
    speculation = resolve_spec_options(a.spec, *model, draft);
  }
  const auto& c = model->config();
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());

  std::vector<int32_t> tokens = tok->encode(a.prompt, c.add_bos);
  if (tokens.empty()) tokens.push_back(c.bos_id);  // a model needs at least one position
  const int64_t capacity = std::min<int64_t>(c.context_length, int64_t(tokens.size()) + a.n);
  if (int64_t(tokens.size()) >= capacity)
    throw std::invalid_argument("prompt of " + std::to_string(tokens.size()) +
                                " tokens leaves no room in the context of " +
                                std::to_string(c.context_length));
  if (const auto spec = constraint_spec(a.constraint))
    return run_constrained({*model, *tok, tokens, capacity - int64_t(tokens.size()), a.sampling,
                            a.threads, a.ids, speculation},
                           *spec, !a.constraint.no_jump_forward);
  kv::ContiguousKvCache kv(c.kv_dims(), capacity, a.kv);
  std::vector<float> logits(size_t(c.vocab_size));
  model::ForwardScratch scratch;
  decode::Sampler sampler(a.sampling);

  // Prefill in chunks so that scratch memory stays bounded for long prompts.
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int64_t kChunk = 512;
  const int64_t n_prompt = int64_t(tokens.size());
  for (int64_t p = 0; p < n_prompt; p += kChunk) {
    const int64_t len = std::min(kChunk, n_prompt - p);
    model->forward(tokens.data() + p, len, p, kv, p + len == n_prompt ? 1 : 0, logits.data(), pool,
                   scratch);
  }
  const double prefill_s = seconds_since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  int64_t generated = 0;
  bool first_piece = n_prompt == 1;  // right after BOS the dummy-prefix space is dropped
  tokenizer::Utf8Stream utf8;
  for (int64_t pos = n_prompt; generated < a.n; ++pos) {
    const int32_t next = sampler.sample(logits.data(), c.vocab_size);
    if (next == c.eos_id || next == c.bos_id) break;
    ++generated;
    if (a.ids) {
      std::printf(generated > 1 ? " %d" : "%d", next);
    } else {
      std::string piece = tok->token_to_piece(next);
      if (first_piece && !piece.empty() && piece[0] == ' ' && tok->strips_leading_space())
        piece.erase(0, 1);
      // Bytes of a multi-byte character may arrive in separate tokens: print whole characters.
      const std::string text = utf8.push(piece);
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    first_piece = false;
    std::fflush(stdout);
    if (generated == a.n || pos >= capacity) break;
    model->forward(&next, 1, pos, kv, 1, logits.data(), pool, scratch);
  }
  const std::string rest = utf8.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);
  const double decode_s = seconds_since(t1);
  std::fprintf(stderr,
               "prefill: %lld tokens, %.1f tok/s | decode: %lld tokens, %.1f tok/s | %d threads\n",
               (long long)n_prompt, double(n_prompt) / prefill_s, (long long)generated,
               generated > 0 ? double(generated) / decode_s : 0.0, pool.size());
  if (a.kv.type != kv::KvType::F32)
    std::fprintf(stderr, "kv cache: %s, %.1f bytes per position over %lld positions\n",
                 a.kv.describe().c_str(), kv.bytes_per_token(), (long long)kv.n_positions());
  return 0;
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  app.add_option("-m,--model", a->model, "model file (.gguf or llama2.c .bin)")->required();
  app.add_option("--tokenizer", a->tokenizer,
                 "tokenizer (llama2.c tok*.bin or .gguf); default: the model's own");
  app.add_option("-p,--prompt", a->prompt, "prompt text");
  app.add_option("-n,--n-predict", a->n, "tokens to generate")->check(CLI::NonNegativeNumber);
  app.add_option("--temp", a->sampling.temperature, "temperature; 0 = greedy")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", a->sampling.top_k, "keep the k most likely tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", a->sampling.top_p, "nucleus sampling threshold")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", a->sampling.seed, "random seed");
  app.add_option("-t,--threads", a->threads, "threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
  add_bf16_dot_flag(app, a->bf16_dot);
  app.add_flag("--ids", a->ids, "print generated token ids instead of text");
  add_constraint_options(app, a->constraint);
  add_kv_cache_options(app, a->kv_args, a->kv,
                       "KV cache: f32 | f16 | int8 | int8-mixed (int8 with f16 sinks, recent "
                       "window, heavy hitters and --kv-fp16-layers)");
  add_spec_options(app, a->spec);
  return [a] { return run_generate(*a); };
}

}  // namespace shrike::cli
