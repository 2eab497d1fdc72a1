// The task definition a model carries: derived from the examples, round-tripped through GGUF
// metadata, refused when malformed, and its answer constraint accepts the answers task_answer()
// writes and what the free-form reader reads, with the task's names only.
#include "task/task_definition.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "constrain/spec.h"
#include "core/file_buffer.h"
#include "task/answer_constraint.h"
#include "task/task_format.h"

namespace shrike::task {
namespace {

using data::Example;

std::vector<Example> examples() {
  return {
      {"where is order SO123", "order_status", {{"order_id", "SO123"}}, "en"},
      {"cancel it", "cancel_order", {}, "en"},
      {"ship to Paris on Monday", "change_address", {{"date", "Monday"}, {"city", "Paris"}}, "en"},
      {"where is order 9", "order_status", {{"order_id", "9"}}, "en"}};
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("shrike_task_def_") + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST(TaskDefinition, FromExamplesSortedAndDistinct) {
  const TaskDefinition t = task_definition_from(examples());
  EXPECT_EQ(t.format, "intent_slots_v1");
  EXPECT_EQ(t.instruction, std::string(kTaskInstruction));
  EXPECT_EQ(t.intents,
            (std::vector<std::string>{"cancel_order", "change_address", "order_status"}));
  EXPECT_EQ(t.slots, (std::vector<std::string>{"city", "date", "order_id"}));
}

TEST(TaskDefinition, GgufRoundTripAndAbsence) {
  const TaskDefinition t = task_definition_from(examples());
  const std::string with = temp_path("with.gguf"), without = temp_path("without.gguf");
  {
    gguf::GgufWriter w;
    w.set_string("general.name", "x");
    add_task_to_gguf(t, w);
    w.write(with);
    gguf::GgufWriter plain;
    plain.set_string("general.name", "x");
    plain.write(without);
  }
  const auto read = task_from_gguf(gguf::GgufFile::open(with));
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, t);
  EXPECT_FALSE(task_from_gguf(gguf::GgufFile::open(without)));
  std::filesystem::remove(with);
  std::filesystem::remove(without);
}

TEST(TaskDefinition, APromptOfItsOwnTravelsAndAFileWithoutOneGetsShrikes) {
  TaskDefinition t = task_definition_from(examples());
  EXPECT_EQ(t.prompt_format(), PromptFormat{});
  EXPECT_EQ(t.prompt_format().text("where is\nmy order"), "intent+slots: where is my order\n");
  t.instruction = "<|user|>Classify: ";
  t.prompt_suffix = "<|end|>\n<|assistant|>";
  EXPECT_EQ(t.prompt_format().text("hi"), "<|user|>Classify: hi<|end|>\n<|assistant|>");
  const std::string with = temp_path("prompt.gguf"), old = temp_path("old.gguf"),
                    empty = temp_path("empty.gguf");
  {
    gguf::GgufWriter w;
    add_task_to_gguf(t, w);
    w.write(with);
    // A file written before shrike.task.prompt_suffix existed: "\n".
    gguf::GgufWriter o;
    o.set_string("shrike.task.format", kTaskFormatV1);
    o.set_string("shrike.task.instruction", "intent+slots: ");
    o.set_string_array("shrike.task.intents", {"a"});
    o.write(old);
    gguf::GgufWriter e;
    add_task_to_gguf(t, e);
    e.set_string("shrike.task.prompt_suffix", "");
    e.write(empty);
  }
  EXPECT_EQ(*task_from_gguf(gguf::GgufFile::open(with)), t);
  EXPECT_EQ(task_from_gguf(gguf::GgufFile::open(old))->prompt_suffix, "\n");
  EXPECT_THROW(task_from_gguf(gguf::GgufFile::open(empty)), FileError);
  for (const auto& p : {with, old, empty}) std::filesystem::remove(p);
}

TEST(TaskDefinition, UnknownFormatOrNoLabelsIsAFileError) {
  const std::string p = temp_path("bad.gguf");
  TaskDefinition t = task_definition_from(examples());
  t.format = "intent_slots_v9";
  {
    gguf::GgufWriter w;
    add_task_to_gguf(t, w);
    w.write(p);
  }
  EXPECT_THROW(task_from_gguf(gguf::GgufFile::open(p)), FileError);
  t.format = kTaskFormatV1;
  t.intents.clear();
  {
    gguf::GgufWriter w;
    add_task_to_gguf(t, w);
    w.write(p);
  }
  EXPECT_THROW(task_from_gguf(gguf::GgufFile::open(p)), FileError);
  std::filesystem::remove(p);
}

TEST(TaskDefinition, AnswerConstraintAcceptsWhatTheReaderReadsWithTheTasksNames) {
  const TaskDefinition t = task_definition_from(examples());
  const constrain::Automaton a = constrain::compile(task_answer_spec(t));
  for (const Example& e : examples()) EXPECT_TRUE(a.matches(task_answer(e))) << task_answer(e);
  EXPECT_TRUE(a.matches(R"({"intent":"cancel_order","slots":{}})"));
  // Out of sorted order, and a repeated name: the free-form reader takes both (the last value
  // of a repeated name wins), so the constraint must not push such an answer elsewhere.
  const std::string unsorted = R"({"intent":"change_address","slots":{"date":"a","city":"b"}})";
  const std::string repeated =
      R"({"intent":"order_status","slots":{"order_id":"1","order_id":"2"}})";
  EXPECT_TRUE(a.matches(unsorted));
  EXPECT_TRUE(a.matches(repeated));
  EXPECT_TRUE(parse_task_answer(unsorted).parsed);
  EXPECT_EQ(parse_task_answer(repeated).slots.at("order_id"), "2");
  EXPECT_FALSE(a.matches(R"({"intent":"track_payment","slots":{}})"));  // not a label
  EXPECT_FALSE(a.matches(R"({"slots":{},"intent":"cancel_order"})"));   // key order
  EXPECT_FALSE(a.matches(R"({"intent":"cancel_order","slots":{"colour":"red"}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"cancel_order"})"));              // slots required
  EXPECT_FALSE(a.matches(R"({"intent":"cancel_order", "slots":{}})"));  // compact only
}

}  // namespace
}  // namespace shrike::task
