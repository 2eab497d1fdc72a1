// `shrike task show MODEL` and `shrike task set MODEL (--data FILE|DIR | --intents A,B [--slots
// X,Y]) -o OUT.gguf`: the task a model carries (shrike.task.*: label set, slot names, prompt
// format), read or attached to any model file, so a checkpoint trained elsewhere gets
// /v1/intent, constrained answers and task evaluation without being retrained here.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/file_buffer.h"
#include "data/user_data.h"
#include "gguf/gguf.h"
#include "task/task_definition.h"

namespace shrike::cli {
namespace {

struct TaskArgs {
  std::string model, data, out;
  std::vector<std::string> intents, slots;
  std::string prompt;  // "PREFIX{text}SUFFIX"; empty: shrike's own format
};

// A prompt as JSON writes a string (newlines as \n), for messages.
std::string shown(const std::string& s) {
  return nlohmann::json(s).dump();
}

// \n, \t and \\ as the characters they name: a shell passes "\n" as two characters.
std::string unescaped(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() &&
        (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// "Classify: {text}\nAnswer: " -> prefix "Classify: ", suffix "\nAnswer: ".
void apply_prompt_template(const std::string& raw, task::TaskDefinition& task) {
  const std::string tmpl = unescaped(raw);
  const std::string hole = "{text}";
  const size_t at = tmpl.find(hole);
  if (at == std::string::npos || tmpl.find(hole, at + 1) != std::string::npos)
    throw std::invalid_argument("task set: --prompt must contain {text} exactly once (got " +
                                shown(tmpl) + ")");
  task.instruction = tmpl.substr(0, at);
  task.prompt_suffix = tmpl.substr(at + hole.size());
  // The answer starts where the suffix ends; with none, the model could not tell.
  if (task.prompt_suffix.empty())
    throw std::invalid_argument(
        "task set: --prompt needs something after {text} (\"\\n\" in shrike's own format), "
        "where the utterance ends and the answer begins");
}

std::string task_list_text(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

int run_task_show(const TaskArgs& a) {
  const GgufInput input(a.model);
  const gguf::GgufFile f = gguf::GgufFile::open(input.path());
  const auto task = task::task_from_gguf(f);
  if (!task) {
    std::printf("%s: no task (attach one with `shrike task set`)\n", a.model.c_str());
    return 0;
  }
  std::printf("%s: task %s\n  prompt: %s\n  intents (%zu): %s\n  slots (%zu): %s\n",
              a.model.c_str(), task->format.c_str(),
              shown(task->instruction + "{text}" + task->prompt_suffix).c_str(),
              task->intents.size(), task_list_text(task->intents).c_str(), task->slots.size(),
              task_list_text(task->slots).c_str());
  return 0;
}

// A name list from the command line: sorted, distinct, none empty.
std::vector<std::string> task_names(const std::vector<std::string>& in, const char* what) {
  std::set<std::string> s;
  for (const std::string& x : in) {
    if (x.empty()) throw std::invalid_argument(std::string("task set: an empty name in ") + what);
    s.insert(x);
  }
  return {s.begin(), s.end()};
}

int run_task_set(const TaskArgs& a) {
  if (a.data.empty() == a.intents.empty())
    throw std::invalid_argument(
        "task set: give the labels by --data or by --intents (one of them)");
  task::TaskDefinition task;
  if (!a.data.empty()) {
    // Every split's labels and slot names: one seen only in dev or test still belongs to the task.
    data::UserSplits s;
    std::vector<data::Example> examples;
    if (data::read_presplit(a.data, {}, s)) {
      examples = std::move(s.train);
      examples.insert(examples.end(), s.dev.begin(), s.dev.end());
      examples.insert(examples.end(), s.test.begin(), s.test.end());
    } else {
      examples = data::read_labelled(a.data);
    }
    task = task::task_definition_from(examples);
  } else {
    task = task::task_definition_from({});
    task.intents = task_names(a.intents, "--intents");
    task.slots = task_names(a.slots, "--slots");
  }
  const GgufInput input(a.model);  // a Hugging Face folder becomes a GGUF first
  const gguf::GgufFile f = gguf::GgufFile::open(input.path());
  // The prompt: the one given, else the one the model's task already had, else shrike's.
  if (!a.prompt.empty()) {
    apply_prompt_template(a.prompt, task);
  } else if (const auto old = task::task_from_gguf(f)) {
    task.instruction = old->instruction;
    task.prompt_suffix = old->prompt_suffix;
  }
  if (!f.has("tokenizer.ggml.tokens"))
    throw FileError(a.model +
                    ": no vocabulary (tokenizer.ggml.tokens): a task model needs its "
                    "tokenizer");
  gguf::GgufWriter w;
  for (const std::string& key : f.keys())
    if (!key.starts_with("shrike.task.")) w.set_value(key, *f.find(key));
  task::add_task_to_gguf(task, w);
  for (const gguf::TensorInfo& t : f.tensors())
    w.add_tensor(t.name, t.type, t.dims, t.data, size_t(t.bytes));
  w.write(a.out);
  std::fprintf(stderr, "task set: %zu intents, %zu slot names, prompt %s; wrote %s\n",
               task.intents.size(), task.slots.size(),
               shown(task.instruction + "{text}" + task.prompt_suffix).c_str(), a.out.c_str());
  return 0;
}

}  // namespace

Runner add_task(CLI::App& app) {
  app.require_subcommand(1);
  auto a = std::make_shared<TaskArgs>();
  auto* show = app.add_subcommand("show", "print the task a model carries");
  show->add_option("model", a->model, "model: GGUF or Hugging Face folder")->required();
  auto* set = app.add_subcommand(
      "set", "attach a task (labels, slot names, prompt format) to a copy of any model");
  set->add_option("model", a->model, "model: GGUF or Hugging Face folder")->required();
  set->add_option("--data", a->data,
                  "labelled utterances whose labels and slot names make the task (.jsonl, .csv, "
                  "or a folder, as `data split` reads)");
  set->add_option("--intents", a->intents, "the labels, comma-separated (instead of --data)")
      ->delimiter(',');
  set->add_option("--slots", a->slots, "the slot names, comma-separated (with --intents)")
      ->delimiter(',');
  set->add_option("--prompt", a->prompt,
                  "the prompt the model was tuned on, {text} where the utterance goes, e.g. "
                  "'Classify: {text}\\nAnswer: ' (default: shrike's 'intent+slots: {text}\\n')");
  set->add_option("-o,--output", a->out, "model GGUF to write")->required();
  return [a, show] { return show->parsed() ? run_task_show(*a) : run_task_set(*a); };
}

}  // namespace shrike::cli
