// Task models carry their task (issue 15): `shrike train` writes shrike.task.* (format,
// instruction, sorted labels and slot names of the training data) and prune, quantize and
// distill keep it; `shrike eval --task-schema on` reads it and every answer then parses and
// names a label, while a model without a task is refused clearly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "data/example.h"
#include "gguf/gguf.h"
#include "run_shrike.h"
#include "task/task_definition.h"

namespace shrike::testing {
namespace {

namespace fs = std::filesystem;

class TaskMetadataCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shrike_task_meta_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    ok("data gen --n 300 -o " + path("d"));
    ok("train --data " + path("d/train.jsonl") +
       " --preset tiny --epochs 1 --no-progress --threads 1 -o " + path("t.gguf"));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  CommandResult ok(const std::string& args) {
    const CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return r;
  }
  fs::path dir_;
};

TEST_F(TaskMetadataCli, TrainWritesItAndEveryWriterKeepsIt) {
  const auto task = task::task_from_gguf(gguf::GgufFile::open(path("t.gguf")));
  ASSERT_TRUE(task);
  EXPECT_EQ(*task, task::task_definition_from(data::read_examples(path("d/train.jsonl"))));
  EXPECT_EQ(task->instruction, "intent+slots: ");
  EXPECT_GT(task->intents.size(), 5u);
  ok("prune " + path("t.gguf") + " -o " + path("p.gguf") + " --calib " + path("d/dev.jsonl"));
  ok("quantize " + path("t.gguf") + " -o " + path("q.gguf") + " --type q8_0");
  ok("distill --teacher " + path("t.gguf") + " --student-preset draft --data " +
     path("d/train.jsonl") + " --epochs 1 --no-progress -o " + path("s.gguf"));
  for (const char* out : {"p.gguf", "q.gguf", "s.gguf"}) {
    const auto kept = task::task_from_gguf(gguf::GgufFile::open(path(out)));
    ASSERT_TRUE(kept) << out;
    EXPECT_EQ(*kept, *task) << out;
  }
}

TEST_F(TaskMetadataCli, EvalWithTheTaskSchemaParsesEveryAnswer) {
  const CommandResult on =
      ok("eval -m " + path("t.gguf") + " --task " + path("d/test_noisy.jsonl") +
         " --limit 40 --task-schema on --json " + path("on.json"));
  std::ifstream in(path("on.json"));
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["answers_parsed"], 40) << on.out;
  EXPECT_EQ(j["answers_in_label_set"], 40) << on.out;
  EXPECT_TRUE(j["task_schema"].get<bool>());
  ok("eval -m " + path("t.gguf") + " --task " + path("d/test_noisy.jsonl") +
     " --limit 40 --task-schema on --no-jump-forward --json " + path("nojf.json"));
  std::ifstream in2(path("nojf.json"));
  const auto k = nlohmann::json::parse(in2);
  // Same answers, more model calls without jump-forward.
  EXPECT_EQ(k["intent_accuracy"], j["intent_accuracy"]);
  EXPECT_GT(k["model_steps_per_answer"].get<double>(), j["model_steps_per_answer"].get<double>());
  ok("synth -o " + path("plain.gguf") + " --dim 64 --layers 2 --heads 4 --ffn 128 --vocab 512");
  const CommandResult r = run_shrike("eval -m " + path("plain.gguf") + " --task " +
                                     path("d/test.jsonl") + " --limit 5 --task-schema on");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("carries no task definition"), std::string::npos) << r.err;
}

// `shrike task set` gives any model (here a random one, as a checkpoint trained elsewhere would
// come) the task of a data file or of a label list; `task show` prints it; the model then
// evaluates with the task's schema, and bad input names what is wrong.
TEST_F(TaskMetadataCli, TaskSetAttachesATaskToAnyModel) {
  ok("synth -o " + path("plain.gguf") + " --dim 64 --layers 2 --heads 4 --ffn 128 --vocab 512");
  EXPECT_NE(ok("task show " + path("plain.gguf")).out.find("no task"), std::string::npos);
  ok("task set " + path("plain.gguf") + " --data " + path("d") + " -o " + path("with.gguf"));
  const auto task = task::task_from_gguf(gguf::GgufFile::open(path("with.gguf")));
  ASSERT_TRUE(task);
  EXPECT_EQ(*task, *task::task_from_gguf(gguf::GgufFile::open(path("t.gguf"))));
  const CommandResult shown = ok("task show " + path("with.gguf"));
  EXPECT_NE(shown.out.find("order_status"), std::string::npos) << shown.out;
  const CommandResult ev = ok("eval -m " + path("with.gguf") + " --task " + path("d/test.jsonl") +
                              " --limit 5 --task-schema on --json " + path("w.json"));
  std::ifstream in(path("w.json"));
  EXPECT_EQ(nlohmann::json::parse(in)["answers_in_label_set"], 5) << ev.out;
  // From a label list; a second set replaces the first.
  ok("task set " + path("with.gguf") + " --intents refund,greet --slots order_id -o " +
     path("list.gguf"));
  const auto listed = task::task_from_gguf(gguf::GgufFile::open(path("list.gguf")));
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->intents, (std::vector<std::string>{"greet", "refund"}));
  EXPECT_EQ(listed->slots, (std::vector<std::string>{"order_id"}));
  // A prompt of its own ("\n" as a shell passes it), kept by a later set without --prompt.
  ok("task set " + path("plain.gguf") + " --data " + path("d") + " --prompt 'Q: {text}\\nA: ' -o " +
     path("own.gguf"));
  ok("task set " + path("own.gguf") + " --intents refund -o " + path("own2.gguf"));
  for (const char* f : {"own.gguf", "own2.gguf"}) {
    const auto own = task::task_from_gguf(gguf::GgufFile::open(path(f)));
    ASSERT_TRUE(own) << f;
    EXPECT_EQ(own->instruction, "Q: ") << f;
    EXPECT_EQ(own->prompt_suffix, "\nA: ") << f;
  }
  EXPECT_NE(ok("task show " + path("own.gguf")).out.find("\"Q: {text}\\nA: \""), std::string::npos);
  for (const char* bad : {"'no hole'", "'{text}'", "'{text} and {text}!'"}) {
    const CommandResult r = run_shrike("task set " + path("plain.gguf") + " --intents a --prompt " +
                                       bad + " -o " + path("x.gguf"));
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--prompt"), std::string::npos) << r.err;
  }
  const CommandResult neither =
      run_shrike("task set " + path("plain.gguf") + " -o " + path("x.gguf"));
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_NE(neither.err.find("--data or by --intents"), std::string::npos) << neither.err;
  const CommandResult missing =
      run_shrike("task set " + path("nope.gguf") + " --intents a -o " + path("x.gguf"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.gguf"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace shrike::testing
