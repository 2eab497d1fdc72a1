// The speculative-decoding options `serve`, `generate` and `bench` share (--spec, --draft,
// --spec-k, --spec-max-batch, --spec-row-cost), registered once, and the draft model they load.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/speculation.h"
#include "model/model.h"

namespace shrike::cli {

struct SpecArgs {
  std::string mode = "off";  // off | ngram | draft
  std::string draft;         // --draft MODEL
  int32_t k = 4;             // --spec-k: longest draft
  int64_t max_batch = 6;     // --spec-max-batch: speculate below this many tokens per step
  double row_cost = engine::SpeculativeConfig{}.row_cost;  // --spec-row-cost
  bool draft_always = false;                               // --spec-draft-always
};

// Registers the options on app; spec_flag is the name of the mode option ("--spec").
void add_spec_options(CLI::App& app, SpecArgs& args, const std::string& spec_flag = "--spec");

// The engine's configuration for these options against target; loads the draft model (kept in
// draft_holder) for --spec draft. Throws std::invalid_argument for unusable settings.
engine::SpeculativeConfig resolve_spec_options(const SpecArgs& args, const model::Model& target,
                                               std::unique_ptr<model::Model>& draft_holder);

}  // namespace shrike::cli
