// `shrike eval` with --text and --ref (perplexity, KL, top-1 against a reference), --task with
// --ref (KL over the gold answers), its input errors, and `shrike data gen --task recall`, run
// as a user runs them on tiny random models.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_shrike.h"

namespace shrike {
namespace {

using testing::CommandResult;
using testing::run_shrike;

class EvalCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        (std::filesystem::temp_directory_path() / ("shrike_eval_cli_" + std::to_string(getpid())))
            .string();
    std::filesystem::create_directories(dir_);
    // The same random weights twice (f32, and rounded to Q8_0: a perturbed copy), and a model
    // with another vocabulary.
    const std::string shape =
        "synth --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --seed 3 ";
    ok(shape + "--vocab 300 --type f32 -o " + path("ref.gguf"));
    ok(shape + "--vocab 300 --type q8_0 -o " + path("q8.gguf"));
    ok(shape + "--vocab 320 --type f32 -o " + path("other.gguf"));
    std::ofstream(path("story.txt"))
        << "Once upon a time there was a little fox who lived near a river. Every morning the fox "
           "ran to the water and looked at the fish. One day a bird asked the fox why it never "
           "swam, and the fox said it was afraid of the cold.\n";
    std::ofstream(path("docs.jsonl")) << "{\"text\":\"the quiet river\"}\n\n"
                                         "{\"text\":\"a fox ran to the water and back again\"}\n";
    std::ofstream(path("task.jsonl"))
        << "{\"text\":\"where is my order\",\"intent\":\"order_status\",\"slots\":{}}\n"
           "{\"text\":\"cancel order "
           "123\",\"intent\":\"cancel\",\"slots\":{\"order_id\":\"123\"}}\n";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string path(const std::string& name) { return dir_ + "/" + name; }
  static CommandResult ok(const std::string& args) {
    CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, 0) << "shrike " << args << "\n" << r.err;
    return r;
  }
  static nlohmann::json json_file(const std::string& name) {
    std::ifstream in(path(name));
    return nlohmann::json::parse(in);
  }
  static inline std::string dir_;
};

TEST_F(EvalCli, TextPerplexityAndKlAgainstAReference) {
  const CommandResult r =
      ok("eval -m " + path("q8.gguf") + " --ref " + path("ref.gguf") + " --text " +
         path("story.txt") + " --ctx 32 --json " + path("kl.json"));
  EXPECT_NE(r.out.find("KL(ref||model)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("top-1 agreement"), std::string::npos) << r.out;
  const auto kl = json_file("kl.json")["text"];
  EXPECT_EQ(kl["ctx"], 32);
  EXPECT_GT(kl["windows"].get<int>(), 1);
  EXPECT_GT(kl["positions"].get<int>(), 40);
  EXPECT_GT(kl["kl_mean"].get<double>(), 0.0);
  EXPECT_LE(kl["kl_mean"].get<double>(), kl["kl_p99"].get<double>());
  EXPECT_LE(kl["kl_p99"].get<double>(), kl["kl_max"].get<double>());
  EXPECT_GT(kl["top1_agreement"].get<double>(), 0.5);
  EXPECT_GT(kl["ref_perplexity"].get<double>(), 1.0);

  // The reference alone: its perplexity, the same figure.
  const CommandResult alone = ok("eval -m " + path("ref.gguf") + " --text " + path("story.txt") +
                                 " --ctx 32 --json " + path("ppl.json"));
  EXPECT_EQ(alone.out.find("KL"), std::string::npos) << alone.out;
  const auto ppl = json_file("ppl.json")["text"];
  EXPECT_EQ(ppl["positions"], kl["positions"]);
  EXPECT_NEAR(ppl["model_perplexity"].get<double>(), kl["ref_perplexity"].get<double>(),
              1e-9 * kl["ref_perplexity"].get<double>());

  // Against itself, on JSONL documents: zero.
  ok("eval -m " + path("ref.gguf") + " --ref " + path("ref.gguf") + " --text " +
     path("docs.jsonl") + " --json " + path("self.json"));
  const auto self = json_file("self.json")["text"];
  EXPECT_EQ(self["documents"], 2);
  EXPECT_EQ(self["kl_max"].get<double>(), 0.0);
  EXPECT_EQ(self["top1_agreement"].get<double>(), 1.0);
}

TEST_F(EvalCli, TaskScoresAndKlOverGoldAnswers) {
  const CommandResult r = ok("eval -m " + path("q8.gguf") + " --ref " + path("ref.gguf") +
                             " --task " + path("task.jsonl") + " --json " + path("task.json"));
  EXPECT_NE(r.out.find("intent accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gold answers vs"), std::string::npos) << r.out;
  const auto j = json_file("task.json");
  EXPECT_EQ(j["n"], 2);  // the task scores stay at the top level
  EXPECT_GT(j["task_kl"]["positions"].get<int>(), 10);
  EXPECT_GT(j["task_kl"]["kl_mean"].get<double>(), 0.0);
}

TEST_F(EvalCli, KvCacheTypeOfTheModelUnderTest) {
  const std::string self = "eval -m " + path("ref.gguf") + " --ref " + path("ref.gguf") +
                           " --text " + path("story.txt") + " --ctx 32";
  const CommandResult int8 = ok(self + " --kv-type int8 --json " + path("int8.json"));
  EXPECT_NE(int8.out.find("KV cache of"), std::string::npos) << int8.out;
  ok(self + " --kv-type int8-mixed --kv-window 4 --kv-sinks 1 --json " + path("mixed.json"));
  const auto a = json_file("int8.json"), b = json_file("mixed.json");
  EXPECT_EQ(a["kv_cache"], "int8");
  EXPECT_EQ(a["kv_chunk"], 0);
  EXPECT_EQ(b["kv_chunk"], 1);  // int8-mixed is measured as decoding runs
  EXPECT_GT(a["text"]["kl_mean"].get<double>(), 0.0);
  EXPECT_GT(b["text"]["kl_mean"].get<double>(), 0.0);
  EXPECT_LT(b["text"]["kl_mean"].get<double>(), a["text"]["kl_mean"].get<double>());

  const CommandResult task = ok("eval -m " + path("q8.gguf") + " --task " + path("task.jsonl") +
                                " --kv-type f16 --json " + path("task_f16.json"));
  EXPECT_NE(task.out.find("intent accuracy"), std::string::npos) << task.out;
  EXPECT_EQ(json_file("task_f16.json")["n"], 2);

  const CommandResult sinks = run_shrike(self + " --kv-sinks 2");
  EXPECT_EQ(sinks.exit_code, 1);
  EXPECT_NE(sinks.err.find("applies to --kv-type int8-mixed"), std::string::npos) << sinks.err;
  const CommandResult layer = run_shrike(self + " --kv-type int8-mixed --kv-fp16-layers 7");
  EXPECT_EQ(layer.exit_code, 1);
  EXPECT_NE(layer.err.find("layer"), std::string::npos) << layer.err;
}

TEST_F(EvalCli, ReportsBadInputs) {
  auto fails = [](const std::string& args, int code, const std::string& message) {
    const CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, code) << "shrike " << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "shrike " << args << "\n" << r.err;
  };
  const std::string m = "eval -m " + path("ref.gguf");
  fails(m, 1, "--text or --task");
  fails(m + " --text " + path("missing.txt"), 2, "cannot open");
  std::ofstream(path("bad.jsonl")) << "{\"text\":\"fine\"}\n{\"text\": oops}\n";
  fails(m + " --text " + path("bad.jsonl"), 2, "bad.jsonl:2: invalid JSON");
  std::ofstream(path("empty.txt")) << "\n  \n";
  fails(m + " --text " + path("empty.txt"), 2, "no text");
  fails(m + " --ref " + path("other.gguf") + " --text " + path("story.txt"), 2, "vocabulary");
  fails(m + " --text " + path("story.txt") + " --ctx 5000", 1, "exceeds the context");
}

TEST_F(EvalCli, DataGenRecall) {
  const CommandResult r =
      ok("data gen --task recall --n-train 40 --n-dev 5 --n-test 3 "
         "--min-distance 5 --max-distance 30 --eval-distances 10,25 --out " +
         path("recall"));
  EXPECT_NE(r.out.find("test_d25 3"), std::string::npos) << r.out;
  for (const char* f : {"train.jsonl", "dev.jsonl", "test_d10.jsonl", "test_d25.jsonl"})
    EXPECT_TRUE(std::filesystem::exists(path("recall/") + f)) << f;
  std::ifstream in(path("recall/test_d10.jsonl"));
  std::string line;
  std::getline(in, line);
  const auto ex = nlohmann::json::parse(line);
  EXPECT_EQ(ex["intent"], "recall");
  EXPECT_TRUE(ex["slots"].contains("code"));

  const CommandResult mixed = run_shrike("data gen --task recall --noise 0.1 -o " + path("x"));
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_NE(mixed.err.find("--task intent only"), std::string::npos) << mixed.err;
  const CommandResult bad =
      run_shrike("data gen --task recall --eval-distances 10,x -o " + path("x"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("'x' is not a whole number"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace shrike
