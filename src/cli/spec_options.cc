#include "cli/spec_options.h"

#include <stdexcept>

namespace shrike::cli {

void add_spec_options(CLI::App& app, SpecArgs& args, const std::string& spec_flag) {
  app.add_option(spec_flag, args.mode,
                 "speculative decoding: off | ngram (prompt lookup) | draft (--draft model); bench "
                 "compares several against off: ngram,draft")
      ->capture_default_str();
  app.add_option("--draft", args.draft,
                 "draft model for --spec draft (same tokenizer; e.g. distill --student-preset "
                 "draft)");
  app.add_option("--spec-k", args.k, "longest draft per step (adapts per sequence below it)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--spec-max-batch", args.max_batch,
                 "speculate only while a step has fewer tokens than this (large batches are no "
                 "longer memory-bound)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--spec-row-cost", args.row_cost,
                 "prompt lookup drafts only as many tokens as its matches pay for: the cost of "
                 "one more verified row relative to a one-token step (0: measured)")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  app.add_flag("--spec-draft-always", args.draft_always,
               "a draft model drafts up to --spec-k whatever it costs (default: only as far as "
               "its measured acceptance and pass time against the target's step pay)");
}

engine::SpeculativeConfig resolve_spec_options(const SpecArgs& args, const model::Model& target,
                                               std::unique_ptr<model::Model>& draft_holder) {
  engine::SpeculativeConfig c;
  c.mode = engine::parse_spec_mode(args.mode);
  c.max_k = args.k;
  c.max_batch_tokens = args.max_batch;
  c.row_cost = args.row_cost;
  c.cost_aware = !args.draft_always;
  if (c.mode == engine::SpecMode::Draft) {
    if (args.draft.empty()) throw std::invalid_argument("--spec draft needs --draft MODEL");
    draft_holder = model::load_model(args.draft);
    c.draft = draft_holder.get();
  } else if (!args.draft.empty()) {
    throw std::invalid_argument("--draft is for --spec draft");
  }
  if (const std::string e = c.error(target); !e.empty()) throw std::invalid_argument(e);
  return c;
}

}  // namespace shrike::cli
