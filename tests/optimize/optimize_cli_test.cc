// `shrike optimize` end to end on a tiny dataset: a tiny teacher trained here, every stage served
// by a real `shrike serve` and measured by a real `shrike loadtest`, with tiny bounds so it takes
// well under a minute; then a rerun that rebuilds nothing; then bad inputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "optimize/served.h"
#include "run_shrike.h"

namespace fs = std::filesystem;
using shrike::testing::CommandResult;
using shrike::testing::run_shrike;

namespace {

class OptimizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shrike_optimize_cli_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

const char* kSmall =
    " --preset tiny --epochs 1 --distill-epochs 1 --batch-size 2 --max-tokens 8 --c1-requests 4"
    " --probes 1 --probe-seconds 0.5 --probe-requests 4 --eval-limit 4 --request-timeout 5"
    " --threads 1";

}  // namespace

TEST_F(OptimizeCli, MeasuresEveryAvailableStageAndCachesModels) {
  ASSERT_EQ(run_shrike("data gen --n 150 --seed 3 -o " + path("data")).exit_code, 0);
  const std::string args = "optimize --data " + path("data") + " -o " + path("out") + kSmall;
  const CommandResult r = run_shrike(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| 0 naive service |"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("stage 4: concurrency 1"), std::string::npos);
  for (const char* f : {"report.md", "report.json", "latency_cdf.svg", "latency.svg", "goodput.svg",
                        "memory.svg", "accuracy.svg", "teacher.gguf", "student-q8_0.gguf"})
    EXPECT_TRUE(fs::exists(path("out/") + f)) << f;

  std::ifstream in(path("out/report.json"));
  const auto j = nlohmann::json::parse(in);
  const auto& st = j.at("stages");
  ASSERT_EQ(st.size(), 6u);
  for (const auto& stage : st) EXPECT_TRUE(stage["available"].get<bool>());
  EXPECT_EQ(st[2]["serving_options"]["speculative"], "off");
  // Stage 3 measured a draft distilled from the student and prompt lookup at concurrency 1, and
  // it and the later stages serve the faster.
  const auto& spec = j.at("speculation");
  ASSERT_EQ(spec.size(), 2u);
  EXPECT_EQ(spec[0]["kind"], "draft");
  EXPECT_EQ(spec[1]["kind"], "ngram");
  EXPECT_NE(spec[0]["chosen"].get<bool>(), spec[1]["chosen"].get<bool>());
  const std::string kind = spec[0]["chosen"].get<bool>() ? "draft" : "ngram";
  // Acceptance is null where a kind proposed nothing (the cost rule may hold back a draft that
  // does not pay), else a fraction; on these requests at least one kind proposes.
  auto fraction_or_null = [](const nlohmann::json& v) {
    return v.is_null() || (v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1);
  };
  int proposed = 0;
  for (const auto& v : spec) {
    EXPECT_GT(v["p50_ms"].get<double>(), 0) << v;
    EXPECT_GT(v["p50_ratio_to_previous_stage"].get<double>(), 0) << v;
    EXPECT_TRUE(fraction_or_null(v["acceptance"])) << v;
    proposed += v["acceptance"].is_number();
  }
  EXPECT_GE(proposed, 1) << spec;
  EXPECT_NE(spec[0]["serve_command"].get<std::string>().find("--draft"), std::string::npos);
  for (int i = 3; i < 6; ++i) {
    EXPECT_EQ(st[i]["serving_options"]["speculative"], kind) << i;
    EXPECT_TRUE(fraction_or_null(st[i]["spec_acceptance"])) << i;
  }
  EXPECT_TRUE(fs::exists(path("out/draft-q8_0.gguf")));
  {
    std::ifstream md(path("out/report.md"));
    std::stringstream text;
    text << md.rdbuf();
    EXPECT_NE(text.str().find("## Speculative decoding: what each kind bought"), std::string::npos);
    EXPECT_NE(text.str().find("## Where the time goes"), std::string::npos);
    EXPECT_NE(text.str().find("| stage 0 without its 50 ms batch window |"), std::string::npos);
  }
  EXPECT_EQ(st[4]["serving_options"]["task_schema"], "off");
  EXPECT_EQ(st[5]["serving_options"]["task_schema"], "on");
  EXPECT_EQ(st[5]["serving_options"]["jump_forward"], "on");
  // Stage 5 serves the trimmed student only when trimming cut the vocabulary by 10% or more,
  // and says which it did.
  const int64_t vocab = j.at("vocab_before_trim"), trimmed = j.at("vocab_after_trim");
  EXPECT_GT(vocab, 0);
  EXPECT_GT(trimmed, 0);
  EXPECT_LE(trimmed, vocab);
  EXPECT_TRUE(fs::exists(path("out/student-trimmed.gguf")));
  const std::string five = st[5]["name"];
  if (trimmed * 10 <= vocab * 9)
    EXPECT_NE(five.find("vocabulary trimmed"), std::string::npos) << five;
  else
    EXPECT_NE(five.find("vocabulary trimming skipped"), std::string::npos) << five;
  // What the servers themselves reported.
  EXPECT_EQ(st[0]["serving_options"]["kv_type"], "f32");
  EXPECT_EQ(st[0]["serving_options"]["batching"], "static");
  EXPECT_EQ(st[0]["serving_options"]["weight_type"], "f32");
  EXPECT_EQ(st[1]["serving_options"]["weight_type"], "q8_0");
  EXPECT_EQ(st[4]["serving_options"]["batching"], "continuous");
  const auto& changes = st[4]["changes"];
  EXPECT_NE(std::find(changes.begin(), changes.end(), "batching: static -> continuous"),
            changes.end())
      << changes;
  for (int i : {0, 1, 2, 4}) {
    EXPECT_GT(st[i]["p50_ms"].get<double>(), 0) << i;
    EXPECT_GT(st[i]["peak_rss_bytes"].get<int64_t>(), 0) << i;
    ASSERT_EQ(st[i]["probes"].size(), 1u) << i;
    // One rate, decided by a majority of up to 3 runs: 2 when they agree, 3 when they split.
    const auto& runs = st[i]["probes"][0]["runs"];
    EXPECT_GE(runs.size(), 2u) << i;
    EXPECT_LE(runs.size(), 3u) << i;
    EXPECT_EQ(st[i]["rate_search_runs"].get<int>(), int(runs.size())) << i;
  }
  // The targets, stage 0 against stage 5, then one per latency lever (each measured stage but
  // 0 and 4, against the measured stage before it), each with a verdict (and on stdout).
  size_t levers = 0;
  for (const auto& s : st)
    if (s["available"].get<bool>() && s["id"] != 0 && s["id"] != 4) ++levers;
  ASSERT_EQ(j.at("targets").size(), 6u + levers);
  EXPECT_NE(j["targets"][6]["target"].get<std::string>().find("stage 1 (+ INT8 weights"),
            std::string::npos)
      << j["targets"][6];
  for (const auto& t : j["targets"]) EXPECT_FALSE(t["verdict"].get<std::string>().empty()) << t;
  EXPECT_NE(r.out.find("## Targets"), std::string::npos) << r.out;
  EXPECT_EQ(st[0]["serving_options"]["batch_wait_ms"], "50");
  // Where the time goes: every stage's parts add up to its mean, stage 0's wait is its batch
  // window (a lone request waits all of it), and stage 0 without the window loses it.
  for (size_t i = 0; i < st.size(); ++i) {
    const auto& b = st[i]["breakdown"];
    const double e2e = b["e2e_mean_ms"].get<double>();
    EXPECT_GT(e2e, 0) << i;
    EXPECT_NEAR(b["queue_wait_mean_ms"].get<double>() + b["prefill_mean_ms"].get<double>() +
                    b["decode_mean_ms"].get<double>(),
                e2e, 1e-6 * e2e + 1e-9)
        << i;
    EXPECT_GE(b["model_steps_mean"].get<double>(), 1) << i;
  }
  EXPECT_GT(st[0]["breakdown"]["queue_wait_mean_ms"].get<double>(), 25) << st[0]["breakdown"];
  const auto& bare = j.at("stage0_without_batch_window");
  EXPECT_EQ(bare["batch_wait_ms"].get<double>(), 50);
  EXPECT_LT(bare["breakdown"]["queue_wait_mean_ms"].get<double>(), 25) << bare;
  EXPECT_LT(bare["p50_ms"].get<double>(), st[0]["p50_ms"].get<double>()) << bare;
  // INT8 weights: under a third of f32's bytes; the pruned student smaller still.
  EXPECT_LT(st[1]["weight_bytes"].get<double>(), st[0]["weight_bytes"].get<double>() / 3);
  EXPECT_LT(st[2]["weight_bytes"].get<double>(), st[1]["weight_bytes"].get<double>());

  // A rerun rebuilds no model (the manifest holds their keys) and measures again.
  const CommandResult again = run_shrike(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("teacher: cached"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("student (distilled): cached"), std::string::npos);
  EXPECT_NE(again.err.find("draft (distilled from the student): cached"), std::string::npos);
  EXPECT_EQ(again.err.find("train --data"), std::string::npos);
  EXPECT_NE(again.err.find("stage 4: concurrency 1"), std::string::npos);

  // `shrike max-rate` measures any server as optimize measures a stage (here the teacher, served
  // by hand): concurrency 1, then the rate search with its runs.
  shrike::optimize::ServedModel server(SHRIKE_BINARY, path("out/teacher.gguf"), {"-t", "1"},
                                       path("serve.log"), 60);
  const CommandResult m = run_shrike("max-rate --url " + server.url() + " --prompts " +
                                     path("out/prompts.jsonl") + " -o " + path("maxrate") +
                                     " --name teacher --c1-requests 3 --probes 2 "
                                     "--probe-seconds 0.5 --probe-requests 4 --request-timeout 5");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("teacher: P50 "), std::string::npos) << m.out;
  std::ifstream mj(path("maxrate/teacher.json"));
  const auto mr = nlohmann::json::parse(mj);
  EXPECT_GT(mr["c1"]["p50_ms"].get<double>(), 0);
  ASSERT_GE(mr["probes"].size(), 1u);
  EXPECT_LE(mr["probes"].size(), 2u);
  EXPECT_GE(mr["probes"][0]["runs"].size(), 2u);
  EXPECT_TRUE(fs::exists(path("maxrate/teacher/teacher.probe1.run1.json")));
}

TEST_F(OptimizeCli, BadInputsNameWhatIsWrong) {
  fs::create_directories(path("data"));
  std::ofstream(path("data/train.jsonl")) << "{\"text\":\"hi\",\"intent\":\"greet\"}\n";
  // A folder without dev and test is a folder of utterances to split: one is too few.
  CommandResult r = run_shrike("optimize --data " + path("data") + " -o " + path("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no test examples after splitting"), std::string::npos) << r.err;
  r = run_shrike("optimize --data " + path("nothing_here") + " -o " + path("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nothing_here: cannot open"), std::string::npos) << r.err;
  std::ofstream(path("bad.csv"))
      << "text,intent,slots\nhello there,greet,\"{\"\"name\"\": \"\"Bo\"\"}\"\n";
  r = run_shrike("optimize --data " + path("bad.csv") + " -o " + path("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.csv:2: slot \"name\" value \"Bo\" does not occur in the text"),
            std::string::npos)
      << r.err;
  for (const char* s : {"dev", "test", "test_noisy"})
    std::ofstream(path("data/") + s + ".jsonl") << "{\"text\":\"hi\",\"intent\":\"greet\"}\n";
  std::ofstream(path("notgguf.gguf")) << "hello";
  r = run_shrike("optimize --data " + path("data") + " --teacher " + path("notgguf.gguf") + " -o " +
                 path("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("notgguf.gguf: not a GGUF file"), std::string::npos) << r.err;
  r = run_shrike("optimize --data " + path("data") + " --teacher " + path("nope.gguf") + " -o " +
                 path("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope.gguf: cannot read"), std::string::npos) << r.err;
  r = run_shrike("max-rate --url http://127.0.0.1:1 --prompts " + path("nope.jsonl") + " -o " +
                 path("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope.jsonl: not a file (--prompts)"), std::string::npos) << r.err;
  std::ofstream(path("data/test.jsonl")) << "{\"text\":\"hi\"}\n";
  r = run_shrike("optimize --data " + path("data") + " -o " + path("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("test.jsonl:1"), std::string::npos) << r.err;
}
