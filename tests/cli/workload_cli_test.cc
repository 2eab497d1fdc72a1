// The intent workload's commands end to end, as a user runs them: data gen -> tokenizer train ->
// train (tiny) -> eval -> prune -> distill -> generate, plus their error exits. Seconds, not a
// real training run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_shrike.h"
#include "shared_data.h"

namespace shrike {
namespace {

using testing::CommandResult;
using testing::run_shrike;

class WorkloadCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        (std::filesystem::temp_directory_path() / ("shrike_workload_" + std::to_string(getpid())))
            .string();
    std::filesystem::create_directories(dir_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string path(const std::string& name) { return dir_ + "/" + name; }
  static CommandResult ok(const std::string& args) {
    CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, 0) << "shrike " << args << "\n" << r.err;
    return r;
  }
  static inline std::string dir_;
};

TEST_F(WorkloadCli, GenTrainEvalPruneDistillGenerate) {
  ok("data gen --n 400 --seed 5 -o " + path("data"));
  for (const char* split : {"train", "dev", "test", "test_noisy"})
    EXPECT_TRUE(std::filesystem::exists(path(std::string("data/") + split + ".jsonl")));

  const CommandResult tok = ok("tokenizer train --data " + path("data/train.jsonl") +
                               " --vocab-size 800 -o " + path("tok.gguf"));
  EXPECT_TRUE(std::filesystem::exists(path("tok.gguf")));

  const CommandResult tr =
      ok("train --data " + path("data/train.jsonl") + " --dev " + path("data/dev.jsonl") +
         " --dev-limit 20 --preset tiny --epochs 1 --tokenizer " + path("tok.gguf") +
         " --no-progress -o " + path("m.gguf"));
  EXPECT_NE(tr.err.find("epoch 1: loss"), std::string::npos) << tr.err;
  EXPECT_NE(tr.err.find("dev (20)"), std::string::npos) << tr.err;
  EXPECT_TRUE(std::filesystem::exists(path("m.ckpt.gguf")));

  // --resume with every epoch done: nothing left to train, the model is written again.
  const CommandResult again = ok("train --data " + path("data/train.jsonl") +
                                 " --preset tiny --epochs 1 --resume "
                                 "--no-progress -o " +
                                 path("m.gguf"));
  EXPECT_NE(again.err.find("resuming"), std::string::npos) << again.err;

  const CommandResult ev = ok("eval -m " + path("m.gguf") + " --task " + path("data/test.jsonl") +
                              " --limit 30 --json " + path("s.json"));
  EXPECT_NE(ev.out.find("intent accuracy"), std::string::npos) << ev.out;
  EXPECT_NE(ev.out.find("per language"), std::string::npos) << ev.out;
  std::ifstream js(path("s.json"));
  const auto scores = nlohmann::json::parse(js);
  EXPECT_EQ(scores["n"], 30);
  EXPECT_TRUE(scores.contains("slot_f1"));

  const CommandResult pr = ok("prune " + path("m.gguf") + " --heads 0.5 --ffn 0.5 --calib " +
                              path("data/dev.jsonl") + " -o " + path("p.gguf"));
  EXPECT_NE(pr.err.find("2 heads (1 kv), ffn 96"), std::string::npos) << pr.err;

  ok("distill --teacher " + path("m.gguf") + " --student " + path("p.gguf") + " --data " +
     path("data/train.jsonl") + " --unlabeled " + path("data/dev.jsonl") +
     " --epochs 1 --finetune-epochs 1 --dev-limit 0 --no-progress -o " + path("d.gguf"));
  const CommandResult gen = ok("generate -m " + path("d.gguf") + " -p 'intent+slots: hi' -n 4");
  EXPECT_FALSE(gen.out.empty());

  // A speculative-decoding draft distilled from scratch: a fresh student of the draft preset
  // with the teacher's tokenizer.
  const CommandResult draft =
      ok("distill --teacher " + path("m.gguf") + " --student-preset draft --data " +
         path("data/train.jsonl") + " --epochs 1 --dev-limit 0 --no-progress -o " +
         path("draft.gguf"));
  EXPECT_NE(draft.err.find("fresh draft student: dim 128, 2 layers"), std::string::npos)
      << draft.err;
  ok("generate -m " + path("draft.gguf") + " -p 'intent+slots: hi' -n 4");

  // Speculative decoding with that draft, and with prompt lookup: plain greedy's tokens.
  const std::string prompt = " -p 'intent+slots: my order SO123 is late, order SO123' -n 24 --ids";
  const CommandResult plain = ok("generate -m " + path("m.gguf") + prompt);
  for (const std::string& spec :
       {std::string("--spec ngram"), "--spec draft --draft " + path("draft.gguf")}) {
    const CommandResult fast = ok("generate -m " + path("m.gguf") + prompt + " " + spec);
    EXPECT_EQ(fast.out, plain.out) << spec;
    EXPECT_NE(fast.err.find("drafts accepted"), std::string::npos) << fast.err;
  }
  // Constrained output speculates too, with the constrained output.
  const std::string regex = prompt + " --regex 'SO[0-9]{3}( is late)?'";
  const CommandResult constrained = ok("generate -m " + path("m.gguf") + regex);
  for (const std::string& spec :
       {std::string("--spec ngram"), "--spec draft --draft " + path("draft.gguf")})
    EXPECT_EQ(ok("generate -m " + path("m.gguf") + regex + " " + spec).out, constrained.out)
        << spec;
  const CommandResult bench =
      ok("bench -m " + path("m.gguf") + " --spec ngram,draft --draft " + path("draft.gguf") +
         " --spec-task " + path("data/test.jsonl") + " --spec-limit 4 -n 16 -r 1 -t 1 --json");
  const auto sides = nlohmann::json::parse(bench.out)["sides"];
  ASSERT_EQ(sides.size(), 4u) << bench.out;  // off, off-fast (float weights), ngram, draft
  for (const auto& side : sides) EXPECT_EQ(side["differs"], 0) << bench.out;
  // Acceptance 1 in small (bench/experiments/spec_bench.sh runs it at 200 prompts and 32 at a time): the
  // teacher with its pruned and distilled student, and with the draft-preset model, as drafts;
  // free-form and constrained to the task's schema; alone and 8 at a time; no block left.
  for (const std::string& draft_model : {path("d.gguf"), path("draft.gguf")})
    for (const std::string schema : {"", " --spec-schema"}) {
      const CommandResult loaded =
          ok("bench -m " + path("m.gguf") + " --spec ngram,draft --draft " + draft_model +
             " --spec-task " + path("data/test.jsonl") + " --spec-limit 16 -n 24 -r 1 -t 1" +
             " --spec-concurrency 8 --json" + schema);
      const auto j = nlohmann::json::parse(loaded.out);
      EXPECT_EQ(j["constrained"], !schema.empty());
      for (const auto& side : j["sides"]) {
        EXPECT_EQ(side["differs"], 0) << loaded.out;
        EXPECT_EQ(side["differs_under_load"], 0) << loaded.out;
        EXPECT_EQ(side["blocks_left"], 0) << loaded.out;
      }
      EXPECT_GT(j["sides"][3]["acceptance_rate"].get<double>(), 0) << loaded.out;
    }
  EXPECT_NE(run_shrike("generate -m " + path("m.gguf") + prompt + " --spec draft").exit_code, 0);
  EXPECT_NE(run_shrike("distill --teacher " + path("m.gguf") + " --student " + path("p.gguf") +
                       " --student-preset draft --data " + path("data/train.jsonl") + " -o " +
                       path("x.gguf"))
                .exit_code,
            0);
}

std::string file_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A from-scratch teacher with a user checkpoint's architecture: --arch qwen2 trains and writes a
// Qwen2 GGUF (q/k/v biases, tied output, RoPE base 1e6) that the engine serves and the training
// layer reads back as what it wrote.
TEST_F(WorkloadCli, TrainsAQwen2ArchitectureTeacher) {
  ok("data gen --n 120 --seed 6 -o " + path("qdata"));
  const CommandResult tr =
      ok("train --arch qwen2 --data " + path("qdata/train.jsonl") +
         " --preset tiny --epochs 1 --vocab-size 600 --no-progress -o " + path("q.gguf"));
  EXPECT_NE(tr.err.find("preset tiny (qwen2)"), std::string::npos) << tr.err;
  ok("generate -m " + path("q.gguf") + " -p 'intent+slots: hi' -n 4");
  std::ifstream in(path("q.gguf"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(bytes.find("qwen2.rope.freq_base"), std::string::npos);
  EXPECT_NE(bytes.find("blk.0.attn_q.bias"), std::string::npos);
  // Tied to token_embd: no tensor named "output.weight" (GGUF strings are u64 length + bytes;
  // blk.N.attn_output.weight ends the same way).
  EXPECT_EQ(bytes.find(std::string("\x0d\0\0\0\0\0\0\0output.weight", 21)), std::string::npos);
  // And pruning reads it back as a trainable Qwen2 model.
  ok("prune " + path("q.gguf") + " --heads 0 --ffn 0.5 --calib " + path("qdata/dev.jsonl") +
     " -o " + path("qp.gguf"));
  const CommandResult bad = run_shrike("train --arch gpt2 --data " + path("qdata/train.jsonl") +
                                       " --preset tiny -o " + path("x.gguf"));
  EXPECT_NE(bad.exit_code, 0);  // a usage error
  EXPECT_NE(bad.err.find("--arch"), std::string::npos) << bad.err;
}

// A draft for a model without task data (issue 16: stories260K): distilled on the teacher's own
// samples, byte-identical for a seed, accepted by generate --draft with plain greedy's output.
TEST_F(WorkloadCli, DraftDistilledOnTeacherSamples) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  const std::string teacher = testing::shared_dir() + "/reference/stories260K/stories260K.gguf";
  const std::string args = "distill --teacher " + teacher +
                           " --student-preset draft --dim 64 --layers 1 --heads 8 --kv-heads 4 "
                           "--ffn 172 --teacher-samples 24 --sample-len 48 --epochs 1 -t 1 "
                           "--no-progress --seed 7 -o ";
  const CommandResult made = ok(args + path("s1.gguf"));
  EXPECT_NE(made.err.find("24 teacher samples"), std::string::npos) << made.err;
  EXPECT_NE(made.err.find("dim 64, 1 layers"), std::string::npos) << made.err;
  ok(args + path("s2.gguf"));
  EXPECT_EQ(file_bytes(path("s1.gguf")), file_bytes(path("s2.gguf")));
  const std::string prompt = " -p 'Once upon a time' -n 32 --ids";
  const CommandResult plain = ok("generate -m " + teacher + prompt);
  const CommandResult fast =
      ok("generate -m " + teacher + prompt + " --spec draft --draft " + path("s1.gguf"));
  EXPECT_EQ(fast.out, plain.out);
  EXPECT_NE(fast.err.find("drafts accepted"), std::string::npos) << fast.err;

  // Wrong combinations name what is wrong.
  const auto refused = [&](const std::string& extra, const std::string& says) {
    const CommandResult r =
        run_shrike("distill --teacher " + teacher + " " + extra + " -o " + path("x.gguf"));
    EXPECT_NE(r.exit_code, 0) << extra;
    EXPECT_NE(r.err.find(says), std::string::npos) << extra << "\n" << r.err;
  };
  refused("--student-preset draft --teacher-samples 4 --sample-len 4096", "the length must be");
  refused("--student " + teacher + " --dim 32 --teacher-samples 4", "--student-preset student");
  refused("--student-preset draft --teacher-samples 4 --dev " + path("nope.jsonl"),
          "--teacher-samples trains on plain text");
  refused("--student-preset draft --sample-len 8 --data " + path("nope.jsonl"), "--sample-len");
}

TEST_F(WorkloadCli, BadInputsGiveClearErrors) {
  const CommandResult missing =
      run_shrike("train --data " + path("nope.jsonl") + " --preset tiny -o " + path("x.gguf"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.jsonl"), std::string::npos) << missing.err;

  std::ofstream(path("bad.jsonl")) << "{\"text\": \"hi\", \"intent\": \"greet\"}\n{\"text\": 5}\n";
  const CommandResult bad =
      run_shrike("train --data " + path("bad.jsonl") + " --preset tiny -o " + path("x.gguf"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad.jsonl:2:"), std::string::npos) << bad.err;

  const CommandResult preset =
      run_shrike("train --data " + path("bad.jsonl") + " --preset enormous -o " + path("x.gguf"));
  EXPECT_NE(preset.exit_code, 0);

  const CommandResult prune = run_shrike("prune " + path("nope.gguf") + " --calib " +
                                         path("bad.jsonl") + " -o " + path("y.gguf"));
  EXPECT_EQ(prune.exit_code, 2);
  EXPECT_NE(prune.err.find("nope.gguf"), std::string::npos) << prune.err;
}

}  // namespace
}  // namespace shrike
