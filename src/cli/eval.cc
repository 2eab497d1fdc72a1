// `shrike eval -m MODEL [--ref REF] [--text F] [--task F.jsonl]`: what a model is worth.
//   --text: perplexity of MODEL on a text (plain, or JSONL with a "text" field per line) cut into
//           windows of --ctx tokens; with --ref, REF's perplexity and KL(REF || MODEL) per
//           position (mean, P99, max) with top-1 agreement.
//   --task: intent accuracy and slot F1 of MODEL's greedy answers (overall, per language, the
//           commonest confusions); with --ref, KL and top-1 agreement over the gold answers'
//           positions (sequences encoded exactly as training encodes them).
//   --task-schema on|off: the answers come from the serving engine (f32 cache, batch-invariant),
//           constrained to the model's task schema or free-form, so the two compare on one path;
//           --task-values utterance|any: slot values copied from the utterance (default) or any;
//           also the share of answers that parse and name a label, and model calls per answer.
//   --kv-type (and the int8-mixed options): the KV cache MODEL runs with, REF staying f32; so
//           `-m M --ref M --kv-type int8` measures what the cache alone costs.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/kv_options.h"
#include "cli/model_files.h"
#include "cli/task_engine.h"
#include "core/file_buffer.h"
#include "core/thread_pool.h"
#include "data/example.h"
#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "quant/kl_eval.h"
#include "task/task_definition.h"
#include "task/task_eval.h"
#include "task/task_scores.h"
#include "task/task_training.h"

namespace shrike::cli {
namespace {

struct EvalArgs {
  std::string model, ref, tokenizer, task, text, json_out, predictions_out;
  int64_t limit = 0;
  int64_t ctx = 0;  // 0: min(context lengths, 256)
  int threads = 0;
  int confusions = 10;
  // The KV cache MODEL runs with (REF always runs f32).
  KvCacheArgs kv_args{"f32", {}};
  kv::KvCacheOptions kv;
  int64_t kv_chunk = -1;                  // -1: 1 for int8-mixed, else 0
  std::string task_schema;                // "", "on" or "off"
  std::string task_values = "utterance";  // with --task-schema on: "utterance" or "any"
  bool no_jump_forward = false;
};

// --task-schema: the answers through the engine, with the schema of the model's task or without.
// The model's task (a GGUF's shrike.task.*), or none.
std::optional<task::TaskDefinition> model_task(const EvalArgs& a) {
  if (std::filesystem::path(a.model).extension() != ".gguf") return std::nullopt;
  return task::task_from_gguf(gguf::GgufFile::open(a.model));
}

std::vector<std::string> engine_answers(const EvalArgs& a, const model::Model& model,
                                        const tokenizer::Tokenizer& tok,
                                        const std::vector<data::Example>& examples, int threads,
                                        nlohmann::ordered_json& json) {
  const std::optional<task::TaskDefinition> task = model_task(a);
  const bool on = a.task_schema == "on";
  if (on && !task)
    throw std::invalid_argument("--task-schema on: " + a.model +
                                " carries no task definition (shrike.task.*, written by shrike "
                                "train)");
  const EngineTaskAnswers r =
      engine_task_answers(model, tok, examples, on ? &*task : nullptr, !a.no_jump_forward, threads,
                          a.task_values == "utterance", 96, task::prompt_format_of(task));
  int64_t steps = 0, tokens = 0, parsed = 0, labelled = 0;
  for (size_t i = 0; i < r.texts.size(); ++i) {
    steps += r.model_steps[i];
    tokens += r.tokens[i];
    const task::TaskPrediction p = task::parse_task_answer(r.texts[i]);
    parsed += p.parsed;
    labelled += p.parsed && task &&
                std::binary_search(task->intents.begin(), task->intents.end(), p.intent);
  }
  const double n = double(std::max<size_t>(1, r.texts.size()));
  std::printf(
      "answers through the engine, task schema %s, jump-forward %s: %.2f model calls and "
      "%.2f tokens per answer; %lld/%zu parse, %lld name an intent of the label set\n",
      on ? (a.task_values == "utterance" ? "on (values from the utterance)" : "on (any values)")
         : "off",
      a.no_jump_forward ? "off" : "on", double(steps) / n, double(tokens) / n, (long long)parsed,
      r.texts.size(), (long long)labelled);
  json["task_schema"] = on;
  if (on) json["task_values"] = a.task_values;
  json["jump_forward"] = !a.no_jump_forward;
  json["model_steps_per_answer"] = double(steps) / n;
  json["tokens_per_answer"] = double(tokens) / n;
  json["answers_parsed"] = parsed;
  json["answers_in_label_set"] = labelled;
  return r.texts;
}

nlohmann::ordered_json kl_json(const quant::KlStats& k) {
  return {{"positions", k.n_positions},
          {"model_perplexity", k.model_perplexity},
          {"ref_perplexity", k.ref_perplexity},
          {"model_nll", k.model_nll},
          {"ref_nll", k.ref_nll},
          {"kl_mean", k.mean_kl},
          {"kl_p99", k.p99_kl},
          {"kl_max", k.max_kl},
          {"top1_agreement", k.top1_agreement}};
}

void print_kl(const quant::KlStats& k) {
  std::printf("  KL(ref||model)   mean %.6f  p99 %.6f  max %.6f nats\n", k.mean_kl, k.p99_kl,
              k.max_kl);
  std::printf("  top-1 agreement  %.4f\n", k.top1_agreement);
}

// The reference must read the same tokens: same vocabulary size and, when its own tokenizer can
// be read, the same pieces.
void check_same_vocabulary(const EvalArgs& a, const model::Model& m, const model::Model& ref,
                           const tokenizer::Tokenizer& tok) {
  if (m.config().vocab_size != ref.config().vocab_size)
    throw FileError(a.ref + ": vocabulary of " + std::to_string(ref.config().vocab_size) +
                    " tokens, " + a.model + " has " + std::to_string(m.config().vocab_size));
  if (!a.tokenizer.empty()) return;  // both read through the one given tokenizer
  std::unique_ptr<tokenizer::Tokenizer> ref_tok;
  try {
    ref_tok = load_tokenizer(a.ref, "", ref.config().vocab_size);
  } catch (const FileError&) {
    return;  // a llama2.c file carries no tokenizer to compare
  }
  if (ref_tok->vocab().pieces != tok.vocab().pieces)
    throw FileError(a.ref + ": its tokenizer differs from " + a.model + "'s");
}

void write_predictions(const EvalArgs& a, const std::vector<data::Example>& examples,
                       const std::vector<std::string>& answers,
                       const std::vector<task::TaskPrediction>& predictions) {
  // One line per example: the utterance, the gold answer and the model's raw answer.
  std::ofstream out(a.predictions_out);
  for (size_t i = 0; i < examples.size(); ++i) {
    nlohmann::ordered_json j;
    j["text"] = examples[i].text;
    j["gold"] = task::task_answer(examples[i]);
    j["answer"] = answers[i];
    j["intent_ok"] = predictions[i].intent == examples[i].intent;
    j["slots_ok"] = predictions[i].slots == examples[i].slots;
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  if (!out) throw FileError(a.predictions_out + ": cannot write");
}

int run_eval(EvalArgs a) {
  if (a.task.empty() && a.text.empty())
    throw std::invalid_argument("eval needs --text or --task (or both)");
  resolve_kv_cache_options(a.kv_args, a.kv);
  const auto model = model::load_model(a.model);
  a.kv.validate(model->config().n_layers);
  const auto tok = load_tokenizer(a.model, a.tokenizer, model->config().vocab_size);
  std::unique_ptr<model::Model> ref;
  if (!a.ref.empty()) {
    ref = model::load_model(a.ref);
    check_same_vocabulary(a, *model, *ref, *tok);
  }
  // Read every input before the slow part, so that a bad file fails at once.
  std::vector<data::Example> examples;
  if (!a.task.empty()) {
    examples = data::read_examples(a.task);
    if (examples.empty()) throw FileError(a.task + ": no examples");
    if (a.limit > 0 && int64_t(examples.size()) > a.limit) examples.resize(size_t(a.limit));
  }
  std::vector<std::string> documents;
  if (!a.text.empty()) documents = quant::read_text_documents(a.text);
  int64_t context = model->config().context_length;
  if (ref) context = std::min(context, ref->config().context_length);

  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  json["model"] = a.model;
  if (ref) json["ref"] = a.ref;
  quant::EvalOptions opt;
  if (a.kv.type != kv::KvType::F32) opt.make_cache = quant::kv_cache_factory(a.kv);
  opt.scored_chunk = a.kv_chunk >= 0 ? a.kv_chunk : a.kv.mixed() ? 1 : 0;
  if (opt.make_cache || opt.scored_chunk > 0) {
    const std::string calls =
        opt.scored_chunk > 0
            ? "scored positions run " + std::to_string(opt.scored_chunk) + " per call"
            : "each sequence in one call";
    std::printf("KV cache of %s: %s; %s\n", a.model.c_str(), a.kv.describe().c_str(),
                calls.c_str());
    json["kv_cache"] = a.kv.describe();
    json["kv_chunk"] = opt.scored_chunk;
  }

  // The prompts as the model's task writes them (the default format for a model without one).
  const task::PromptFormat format = task::prompt_format_of(model_task(a));
  if (!a.task.empty()) {
    // Decoding runs a prompt in one call, then a token per call, whatever --kv-chunk says.
    const auto answers =
        a.task_schema.empty()
            ? task::generate_answers(*model, *tok, examples, pool, 96, 64, opt.make_cache, format)
            : engine_answers(a, *model, *tok, examples, pool.size(), json);
    std::vector<task::TaskPrediction> predictions;
    for (const std::string& answer : answers)
      predictions.push_back(task::parse_task_answer(answer));
    const task::TaskScores scores = task::score_task(examples, predictions);
    std::printf("%s: %s\n%s", a.model.c_str(), a.task.c_str(),
                task::format_scores(scores, a.confusions).c_str());
    // The scores stay at the top level, where scripts read them.
    const auto task_json = nlohmann::ordered_json::parse(task::scores_json(scores));
    for (const auto& [key, value] : task_json.items()) json[key] = value;
    if (!a.predictions_out.empty()) write_predictions(a, examples, answers, predictions);
    if (ref) {
      const std::vector<quant::ScoredSequence> seqs = task::task_sequences(*tok, examples, format);
      for (size_t i = 0; i < seqs.size(); ++i)
        if (int64_t(seqs[i].tokens.size()) - 1 > context)
          throw FileError(a.task + ": example " + std::to_string(i + 1) + " has " +
                          std::to_string(seqs[i].tokens.size()) +
                          " tokens with its answer, more than the context of " +
                          std::to_string(context));
      const quant::KlStats k = quant::compare_models(*model, *ref, seqs, pool, opt);
      std::printf("gold answers vs %s (%lld positions):\n", a.ref.c_str(),
                  (long long)k.n_positions);
      std::printf("  perplexity       model %.4f  ref %.4f\n", k.model_perplexity,
                  k.ref_perplexity);
      print_kl(k);
      json["task_kl"] = kl_json(k);
    }
  }

  if (!a.text.empty()) {
    const int64_t ctx = a.ctx > 0 ? a.ctx : std::min<int64_t>(context, 256);
    // A window of ctx tokens runs ctx - 1 positions (its last token is only a target).
    if (ctx - 1 > context)
      throw std::invalid_argument("--ctx " + std::to_string(ctx) + " exceeds the context of " +
                                  std::to_string(context) + " tokens");
    std::vector<quant::ScoredSequence> seqs = quant::text_sequences(*tok, documents, ctx);
    if (a.limit > 0 && int64_t(seqs.size()) > a.limit) seqs.resize(size_t(a.limit));
    if (seqs.empty()) throw FileError(a.text + ": no window with a token to predict");
    std::printf("%s%s%s on %s: %zu document%s, %zu window%s of <= %lld tokens\n", a.model.c_str(),
                ref ? " vs " : "", a.ref.c_str(), a.text.c_str(), documents.size(),
                documents.size() == 1 ? "" : "s", seqs.size(), seqs.size() == 1 ? "" : "s",
                (long long)ctx);
    nlohmann::ordered_json t = {
        {"file", a.text}, {"documents", documents.size()}, {"windows", seqs.size()}, {"ctx", ctx}};
    if (ref) {
      const quant::KlStats k = quant::compare_models(*model, *ref, seqs, pool, opt);
      std::printf("  positions        %lld\n", (long long)k.n_positions);
      std::printf("  perplexity       model %.4f  ref %.4f\n", k.model_perplexity,
                  k.ref_perplexity);
      print_kl(k);
      t.update(kl_json(k));
    } else {
      const quant::PerplexityStats p = quant::perplexity(*model, seqs, pool, opt);
      std::printf("  positions        %lld\n", (long long)p.n_positions);
      std::printf("  perplexity       %.4f (%.4f nats/token)\n", p.perplexity, p.nll);
      t.update(
          {{"positions", p.n_positions}, {"model_perplexity", p.perplexity}, {"model_nll", p.nll}});
    }
    json["text"] = t;
  }

  if (!a.json_out.empty()) {
    std::ofstream out(a.json_out);
    out << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    if (!out) throw FileError(a.json_out + ": cannot write");
  }
  return 0;
}

}  // namespace

Runner add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  app.add_option("-m,--model", a->model, "model file")->required();
  app.add_option("--ref", a->ref,
                 "reference model (same tokenizer): adds its perplexity, KL(ref || model) and "
                 "top-1 agreement");
  app.add_option("--tokenizer", a->tokenizer, "tokenizer file (default: the model's own)");
  app.add_option("--text", a->text,
                 "text to score: plain text, or .jsonl with a \"text\" field per line");
  app.add_option("--task", a->task, "labelled examples (JSONL)");
  app.add_option("--task-schema", a->task_schema,
                 "--task answers through the serving engine, constrained to the model's task "
                 "schema (on) or free-form (off)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--task-values", a->task_values,
                 "with --task-schema on: slot values copied from the utterance (utterance, as "
                 "serve does for the task's prompts) or any string up to 64 characters (any)")
      ->check(CLI::IsMember({"utterance", "any"}));
  app.add_flag("--no-jump-forward", a->no_jump_forward,
               "with --task-schema on: step through forced tokens one model call each");
  app.add_option("--ctx", a->ctx, "tokens per --text window (default: min(context, 256))")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 30));
  app.add_option("--limit", a->limit, "evaluate only the first N examples / text windows")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", a->json_out, "also write every figure as JSON to this file");
  app.add_option("--predictions", a->predictions_out,
                 "write every example's gold and generated answer to this JSONL file");
  app.add_option("--confusions", a->confusions, "confusions listed")->check(CLI::Range(0, 1000));
  app.add_option("-t,--threads", a->threads, "threads (default: all cores)");
  add_kv_cache_options(app, a->kv_args, a->kv,
                       "KV cache of MODEL (REF: f32): f32 | f16 | int8 | int8-mixed (int8 with f16 "
                       "sinks, recent window, heavy hitters and --kv-fp16-layers)");
  app.add_option("--kv-chunk", a->kv_chunk,
                 "--text/--ref scoring: positions per forward call after a sequence's prefix "
                 "(0: whole sequences; default 1 for int8-mixed, which must be measured as "
                 "decoding runs, else 0)")
      ->check(CLI::NonNegativeNumber);
  return [a] { return run_eval(*a); };
}

}  // namespace shrike::cli
