// `shrike generate` with a constraint (--json-schema, --regex, --choice, --json-object): the
// answer runs through the serving engine, which applies the masks and jump-forward exactly as
// `shrike serve` does, and reports the model calls the answer took.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "constrain/spec.h"
#include "decode/sampler.h"
#include "engine/speculation.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace shrike::cli {

struct ConstraintArgs {
  std::string json_schema_file, regex;
  std::vector<std::string> choices;
  bool json_object = false;
  bool no_jump_forward = false;
};

void add_constraint_options(CLI::App& app, ConstraintArgs& a);
// The constraint asked for, or none; std::invalid_argument for two at once or an unreadable
// schema file.
std::optional<constrain::ConstraintSpec> constraint_spec(const ConstraintArgs& a);

struct ConstrainedRun {
  const model::Model& model;
  const tokenizer::Tokenizer& tok;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  decode::SamplerParams sampling;
  int threads = 0;
  bool ids = false;
  engine::SpeculativeConfig spec;  // off, or speculation under the constraint
};
// Streams the answer to stdout, the model calls and finish reason to stderr. Throws
// constrain::ConstraintError for a constraint the compiler refuses.
int run_constrained(const ConstrainedRun& run, const constrain::ConstraintSpec& spec,
                    bool jump_forward);

}  // namespace shrike::cli
