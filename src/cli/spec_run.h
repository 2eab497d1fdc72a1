// Generation through the serving engine for the CLI: `generate --spec` (one request, streamed)
// and `bench --spec` (speculation on against off on the same prompts, interleaved).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/spec_options.h"
#include "constrain/constraint.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace shrike::cli {

struct EngineRun {
  std::vector<int32_t> tokens;
  std::string text;
  double seconds = 0, first_token_seconds = 0;  // submit -> last / first event
  int64_t proposed = 0, accepted = 0;
  engine::FinishReason reason = engine::FinishReason::Stop;
};

// An engine for one stream at a time: `threads`, no prefix cache (a benchmark repeats prompts),
// KV memory for one sequence of the model's context.
engine::EngineConfig single_stream_config(int threads, const engine::SpeculativeConfig& spec);

// Runs one request to its end; on_text gets each piece of text as it arrives.
EngineRun run_one(engine::Engine& e, engine::GenerationRequest req,
                  const std::function<void(const std::string&)>& on_text = {});

struct SpecBenchOptions {
  std::string model_path;
  std::vector<std::string> prompts;  // empty: built-in input-grounded prompts
  bool bos = false;                  // encode with BOS whatever the model says (task prompts)
  int64_t n = 64;
  int threads = 0, repeats = 3;
  bool json = false;
  // Every request under this constraint (the task model's schema), with jump-forward.
  std::shared_ptr<const constrain::Constraint> constraint;
  // Greedy identity under load: after the timed runs, every side also runs all prompts
  // `concurrency` at a time (one engine with room for them, prefix cache on) and counts the
  // answers that differ from plain greedy alone, and the KV blocks still in use afterwards.
  int concurrency = 0;
};

// `bench --spec`: greedy generation of each prompt with speculation off and on, interleaved,
// repeats times; medians of decode tokens/s and latency, acceptance, draft time share; answers
// that differ from plain greedy's, alone and (o.concurrency) under load.
int run_spec_bench(const model::Model& m, const SpecArgs& spec, const SpecBenchOptions& o);

}  // namespace shrike::cli
