// The task definition a model carries: derived from the examples, round-tripped through GGUF
// metadata, refused when malformed, and its schema accepts exactly the answers task_answer()
// writes (key order included) for the label set.
#include "data/task_definition.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "constrain/spec.h"
#include "core/file_buffer.h"
#include "data/task_format.h"

namespace shrike::data {
namespace {

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

TEST(TaskDefinition, SchemaAcceptsTheTaskAnswersOnly) {
  const TaskDefinition t = task_definition_from(examples());
  constrain::ConstraintSpec spec{constrain::ConstraintSpec::Kind::JsonSchema, {}, {}, {}};
  spec.schema = task_schema(t);
  const constrain::Automaton a = constrain::compile(spec);
  for (const Example& e : examples()) EXPECT_TRUE(a.matches(task_answer(e))) << task_answer(e);
  EXPECT_TRUE(a.matches(R"({"intent":"cancel_order","slots":{}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"track_payment","slots":{}})"));  // not a label
  EXPECT_FALSE(a.matches(R"({"slots":{},"intent":"cancel_order"})"));   // key order
  EXPECT_FALSE(a.matches(R"({"intent":"cancel_order","slots":{"date":"a","city":"b"}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"cancel_order","slots":{"colour":"red"}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"cancel_order"})"));  // slots required
}

}  // namespace
}  // namespace shrike::data
