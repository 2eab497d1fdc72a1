#include "cli/generate_constrained.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "constrain/constraint.h"
#include "engine/engine.h"

namespace shrike::cli {

void add_constraint_options(CLI::App& app, ConstraintArgs& a) {
  app.add_option("--json-schema", a.json_schema_file,
                 "constrain the output to this JSON schema (a file; compact JSON, properties in "
                 "the schema's order)");
  app.add_option("--regex", a.regex, "constrain the output to match this regular expression");
  app.add_option("--choice", a.choices, "constrain the output to one of these (repeat the option)");
  app.add_flag("--json-object", a.json_object, "constrain the output to a JSON object");
  app.add_flag("--no-jump-forward", a.no_jump_forward,
               "step through tokens the constraint forces one model call each (same output; to "
               "compare model calls)");
}

std::optional<constrain::ConstraintSpec> constraint_spec(const ConstraintArgs& a) {
  using Kind = constrain::ConstraintSpec::Kind;
  std::vector<constrain::ConstraintSpec> given;
  if (!a.json_schema_file.empty()) {
    std::ifstream in(a.json_schema_file);
    if (!in) throw std::invalid_argument("cannot read --json-schema file " + a.json_schema_file);
    std::stringstream ss;
    ss << in.rdbuf();
    constrain::ConstraintSpec s{Kind::JsonSchema, {}, {}, {}};
    try {
      s.schema = nlohmann::ordered_json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument("--json-schema " + a.json_schema_file +
                                  " is not JSON: " + e.what());
    }
    given.push_back(std::move(s));
  }
  if (!a.regex.empty()) given.push_back({Kind::Regex, {}, a.regex, {}});
  if (!a.choices.empty()) given.push_back({Kind::Choice, a.choices, {}, {}});
  if (a.json_object) given.push_back({Kind::JsonObject, {}, {}, {}});
  if (given.size() > 1)
    throw std::invalid_argument(
        "give at most one of --json-schema, --regex, --choice and --json-object");
  if (given.empty()) return std::nullopt;
  return given[0];
}

int run_constrained(const ConstrainedRun& run, const constrain::ConstraintSpec& spec,
                    bool jump_forward) {
  engine::GenerationRequest req;
  req.prompt = run.prompt;
  req.max_tokens = run.max_tokens;
  req.sampling = run.sampling;
  req.jump_forward = jump_forward;
  req.constraint = std::make_shared<const constrain::Constraint>(
      constrain::compile(spec), constrain::TokenVocab::from_tokenizer(run.tok));
  engine::EngineConfig config;
  config.scheduler.max_seqs = 1;
  config.scheduler.context_length = run.model.config().context_length;
  config.threads = run.threads;
  config.spec = run.spec;
  engine::Engine eng(run.model, run.tok, config);
  const auto t0 = std::chrono::steady_clock::now();
  engine::SubmitResult sub = eng.submit(std::move(req));
  if (sub.status != engine::SubmitStatus::Accepted) throw std::invalid_argument(sub.message);
  engine::StreamEvent ev;
  bool first = true;
  while (sub.stream->next(ev, std::chrono::milliseconds(1000)) || !ev.finished) {
    if (run.ids) {
      for (int32_t t : ev.tokens) std::printf(first ? "%d" : " %d", t), first = false;
    } else {
      std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    }
    std::fflush(stdout);
    if (ev.finished) break;
  }
  std::printf("\n");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ev.finish_reason == engine::FinishReason::Error)
    throw std::runtime_error("generation failed: " + ev.error);
  std::fprintf(stderr,
               "constrained (%s): %lld tokens in %lld model calls (jump-forward %s), finish: %s, "
               "%.3f s\n",
               constrain::kind_name(spec.kind), (long long)ev.completion_tokens,
               (long long)ev.model_steps, jump_forward ? "on" : "off",
               ev.finish_reason == engine::FinishReason::Stop ? "stop" : "length", s);
  return 0;
}

}  // namespace shrike::cli
