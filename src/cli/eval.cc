// `shrike eval -m MODEL --task F.jsonl`: intent accuracy and slot F1 of a model's greedy answers
// (overall, per language, the commonest confusions).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/file_buffer.h"
#include "core/thread_pool.h"
#include "data/example.h"
#include "data/metrics.h"
#include "model/model.h"
#include "train/task_eval.h"

namespace shrike::cli {
namespace {

struct EvalArgs {
  std::string model, tokenizer, task, json_out, predictions_out;
  int64_t limit = 0;
  int threads = 0;
  int confusions = 10;
};

int run_eval(const EvalArgs& a) {
  const auto model = model::load_model(a.model);
  const auto tok = load_tokenizer(a.model, a.tokenizer, model->config().vocab_size);
  auto examples = data::read_examples(a.task);
  if (a.limit > 0 && int64_t(examples.size()) > a.limit) examples.resize(size_t(a.limit));
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());
  const auto answers = train::generate_answers(*model, *tok, examples, pool);
  std::vector<data::TaskPrediction> predictions;
  for (const std::string& a : answers) predictions.push_back(data::parse_task_answer(a));
  const data::TaskScores scores = data::score_task(examples, predictions);
  std::printf("%s: %s\n%s", a.model.c_str(), a.task.c_str(),
              data::format_scores(scores, a.confusions).c_str());
  if (!a.json_out.empty()) {
    std::ofstream out(a.json_out);
    out << data::scores_json(scores) << '\n';
    if (!out) throw FileError(a.json_out + ": cannot write");
  }
  if (!a.predictions_out.empty()) {
    // One line per example: the utterance, the gold answer and the model's raw answer.
    std::ofstream out(a.predictions_out);
    for (size_t i = 0; i < examples.size(); ++i) {
      nlohmann::ordered_json j;
      j["text"] = examples[i].text;
      j["gold"] = data::task_answer(examples[i]);
      j["answer"] = answers[i];
      j["intent_ok"] = predictions[i].intent == examples[i].intent;
      j["slots_ok"] = predictions[i].slots == examples[i].slots;
      out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    }
    if (!out) throw FileError(a.predictions_out + ": cannot write");
  }
  return 0;
}

}  // namespace

Runner add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  app.add_option("-m,--model", a->model, "model file")->required();
  app.add_option("--tokenizer", a->tokenizer, "tokenizer file (default: the model's own)");
  app.add_option("--task", a->task, "labelled examples (JSONL)")->required();
  app.add_option("--limit", a->limit, "evaluate only the first N examples")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", a->json_out, "also write the scores as JSON to this file");
  app.add_option("--predictions", a->predictions_out,
                 "write every example's gold and generated answer to this JSONL file");
  app.add_option("--confusions", a->confusions, "confusions listed")->check(CLI::Range(0, 1000));
  app.add_option("-t,--threads", a->threads, "threads (default: all cores)");
  return [a] { return run_eval(*a); };
}

}  // namespace shrike::cli
