// Three users, each with their own model and their own labelled utterances, run `shrike optimize
// --teacher MODEL --data DATA` and nothing else (issue 28): a Qwen2.5-shaped Hugging Face folder
// (151,936-token byte-level BPE) with a CSV, a Llama-3.2-shaped folder (128,256 tokens, llama3
// rope scaling) with one JSONL file, and a SentencePiece GGUF with a folder of JSONL and CSV files.
// Each label set is the user's own. The data is split, the task attached to the teacher, every
// stage built, served and measured, and the report written. Random weights: the point is that
// every step runs on exactly what the user brings; accuracy is measured, not asserted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "data/example.h"
#include "gguf/gguf.h"
#include "run_shrike.h"
#include "task/task_definition.h"

namespace fs = std::filesystem;
using shrike::testing::CommandResult;
using shrike::testing::run_shrike;

namespace {

const char* kSmall =
    " --preset tiny --distill-epochs 1 --batch-size 2 --max-tokens 8 --c1-requests 4"
    " --probes 1 --probe-seconds 0.5 --probe-requests 4 --eval-limit 4 --request-timeout 5"
    " --threads 1";

struct User {
  std::string name;
  std::string synth_flags;  // empty: synth's own SentencePiece GGUF, no folder
  std::string data_kind;    // "csv", "jsonl" or "folder"
  // The prompt their model was tuned on (`optimize --prompt`); empty: shrike's own.
  std::string prompt = "";
};

class OptimizeUsers : public ::testing::TestWithParam<User> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("shrike_optimize_users_" + GetParam().name + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void ok(const std::string& args) {
    const CommandResult r = run_shrike(args);
    ASSERT_EQ(r.exit_code, 0) << "shrike " << args << "\n" << r.err;
  }
  fs::path dir_;
};

// The user's own label set: the built-in intents folded into four of theirs.
std::string user_label(const std::string& intent, const std::string& user) {
  static const char* kLabels[] = {"orders", "payments", "account", "other"};
  return user + "_" + kLabels[std::hash<std::string>{}(intent) % 4];
}

std::string csv_field(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Writes the user's utterances in their format; returns what --data names.
std::string write_user_data(const std::vector<shrike::data::Example>& examples, const User& u,
                            const std::string& dir) {
  auto as_csv = [&](size_t from, size_t to, const std::string& file) {
    std::ofstream f(file);
    f << "text,intent,slots\n";
    for (size_t i = from; i < to; ++i) {
      nlohmann::json slots = nlohmann::json::object();
      for (const auto& [k, v] : examples[i].slots) slots[k] = v;
      f << csv_field(examples[i].text) << "," << user_label(examples[i].intent, u.name) << ","
        << (examples[i].slots.empty() ? "" : csv_field(slots.dump())) << "\n";
    }
  };
  auto as_jsonl = [&](size_t from, size_t to, const std::string& file) {
    std::vector<shrike::data::Example> part(examples.begin() + long(from),
                                            examples.begin() + long(to));
    for (auto& e : part) e.intent = user_label(e.intent, u.name);
    shrike::data::write_examples(part, file);
  };
  if (u.data_kind == "csv") {
    as_csv(0, examples.size(), dir + "/utterances.csv");
    return dir + "/utterances.csv";
  }
  if (u.data_kind == "jsonl") {
    as_jsonl(0, examples.size(), dir + "/utterances.jsonl");
    return dir + "/utterances.jsonl";
  }
  fs::create_directories(dir + "/mine");
  as_jsonl(0, examples.size() / 2, dir + "/mine/2025.jsonl");
  as_csv(examples.size() / 2, examples.size(), dir + "/mine/2026.csv");
  return dir + "/mine";
}

}  // namespace

TEST_P(OptimizeUsers, OneCommandFromTheirModelAndData) {
  const User& u = GetParam();
  ok("data gen --n 60 --lang en,zh --seed 8 -o " + path("gen"));
  std::vector<shrike::data::Example> examples;
  for (const char* split : {"train", "dev", "test"})
    for (auto& e : shrike::data::read_examples(path("gen/") + split + ".jsonl"))
      examples.push_back(e);
  examples.resize(120);  // ~30 texts a label: three of each held out for test
  const std::string data = write_user_data(examples, u, dir_.string());

  std::string teacher;
  if (u.synth_flags.empty()) {
    teacher = path("model.gguf");
    ok("synth --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab 2000 --context 256 "
       "--type f32 -o " +
       teacher);
  } else {
    ok("synth --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --context 256 --type f32 " +
       u.synth_flags + " -o " + path("synth.gguf"));
    teacher = path("hf");
    ok("export-hf " + path("synth.gguf") + " -o " + teacher + " --type bf16");
  }

  const std::string prompt = u.prompt.empty() ? "" : " --prompt '" + u.prompt + "'";
  const CommandResult r = run_shrike("optimize --teacher " + teacher + " --data " + data + " -o " +
                                     path("out") + kSmall + prompt);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| 5 + vocabulary trimmed"), std::string::npos) << r.out;
  std::ifstream in(path("out/report.json"));
  const auto j = nlohmann::json::parse(in);
  const auto& stages = j.at("stages");
  ASSERT_EQ(stages.size(), 6u);
  for (const auto& st : stages) {
    EXPECT_TRUE(st["available"].get<bool>()) << st["name"];
    EXPECT_GT(st["p50_ms"].get<double>(), 0) << st["name"];
    EXPECT_TRUE(st.contains("intent_accuracy") && st.contains("noisy_slot_f1")) << st["name"];
  }
  EXPECT_NE(j.at("teacher").get<std::string>().find("task attached"), std::string::npos)
      << j.at("teacher");
  // The splits are the user's utterances, the task their labels; no utterance in two splits.
  std::set<std::string> train_texts, labels;
  for (const auto& e : shrike::data::read_examples(path("out/data/train.jsonl"))) {
    train_texts.insert(e.text);
    labels.insert(e.intent);
  }
  for (const char* split : {"dev", "test"})
    for (const auto& e : shrike::data::read_examples(path("out/data/") + split + ".jsonl"))
      EXPECT_EQ(train_texts.count(e.text), 0u) << e.text;
  for (const std::string& l : labels) EXPECT_EQ(l.rfind(u.name + "_", 0), 0u) << l;
  const auto task =
      shrike::task::task_from_gguf(shrike::gguf::GgufFile::open(path("out/teacher.gguf")));
  ASSERT_TRUE(task);
  for (const std::string& l : task->intents) EXPECT_EQ(l.rfind(u.name + "_", 0), 0u) << l;
  // Their prompt is the task's, and every request and every model built speaks it.
  if (!u.prompt.empty()) {
    EXPECT_EQ(task->instruction, "Classify the request: ");
    EXPECT_EQ(task->prompt_suffix, "\nAnswer: ");
    for (const char* model : {"student.gguf", "student-trimmed.gguf", "draft.gguf"}) {
      const auto carried =
          shrike::task::task_from_gguf(shrike::gguf::GgufFile::open(path("out/") + model));
      ASSERT_TRUE(carried) << model;
      EXPECT_EQ(carried->prompt_format(), task->prompt_format()) << model;
    }
    std::ifstream prompts(path("out/prompts.jsonl"));
    std::string line;
    ASSERT_TRUE(std::getline(prompts, line));
    const std::string p = nlohmann::json::parse(line).at("prompt").get<std::string>();
    EXPECT_EQ(p.rfind("Classify the request: ", 0), 0u) << p;
    EXPECT_TRUE(p.ends_with("\nAnswer: ")) << p;
  }
  // The trimmed student keeps far fewer tokens than the user's vocabulary.
  EXPECT_LT(j.at("vocab_after_trim").get<int64_t>() * 2, j.at("vocab_before_trim").get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(
    Users, OptimizeUsers,
    ::testing::Values(User{"qwen", "--arch qwen2 --vocab 151936 --vocab-type qwen2 --tied", "csv"},
                      User{"llama",
                           "--vocab 128256 --vocab-type llama-bpe --tied --rope-theta 500000 "
                           "--llama3-rope-factor 32 --llama3-rope-original 64",
                           "jsonl", "Classify the request: {text}\\nAnswer: "},
                      User{"spm", "", "folder"}),
    [](const auto& info) { return info.param.name; });
