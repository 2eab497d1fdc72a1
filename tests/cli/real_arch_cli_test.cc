// A user's checkpoint, as a Hugging Face folder, through every command that compresses it with
// nothing converted by hand: Qwen2.5-shaped (q/k/v biases, tied, 151,936-token byte-level BPE),
// Llama-3.2-shaped (llama3 rope scaling, tied, 128,256-token byte-level BPE) and Mistral-shaped
// (32,000-token SentencePiece) folders, each written by `export-hf` from a random-weight model.
// GPTQ and AWQ with calibration, pruning by depth, width, heads and FFN, distillation of the
// pruned student and of a fresh draft all read the folder directly; what they write loads,
// generates, and keeps the chat template and rope scaling; the student goes back out as a
// folder that generates exactly what its GGUF does. (bench/experiments/llamacpp_arch_check.sh runs the
// same on llama.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "run_shrike.h"

namespace shrike {
namespace {

using testing::CommandResult;
using testing::run_shrike;

const std::string kTemplate = "{% for m in messages %}{{ m.content }}{% endfor %}";

struct Shape {
  std::string name, synth_flags, model_type;
};

class RealArchCli : public ::testing::TestWithParam<Shape> {
 protected:
  static void SetUpTestSuite() {
    dir_ = (std::filesystem::temp_directory_path() /
            ("shrike_real_arch_cli_" + std::to_string(getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    ok("data gen --n 12 --lang en --seed 3 -o " + path("data"));
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

// The folder a user would bring: config.json, model.safetensors (bf16), tokenizer files.
std::string make_folder(const Shape& s, const std::string& dir) {
  const std::string gguf = dir + "/" + s.name + "-synth.gguf";
  const std::string hf = dir + "/" + s.name + "-hf";
  EXPECT_EQ(run_shrike("synth --dim 64 --layers 3 --heads 4 --kv-heads 2 --ffn 96 --context 256 "
                       "--type f32 --seed 9 " +
                       s.synth_flags + " -o " + gguf)
                .exit_code,
            0);
  const CommandResult r = run_shrike("export-hf " + gguf + " -o " + hf + " --type bf16");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A chat template and (for Mistral) the family's own config fields, as the hub's files have.
  nlohmann::json tc;
  std::ifstream(hf + "/tokenizer_config.json") >> tc;
  tc["chat_template"] = kTemplate;
  std::ofstream(hf + "/tokenizer_config.json") << tc.dump(1);
  if (s.model_type == "mistral") {
    nlohmann::json c;
    std::ifstream(hf + "/config.json") >> c;
    c["model_type"] = "mistral";
    c["architectures"] = {"MistralForCausalLM"};
    c["sliding_window"] = nullptr;
    c.erase("attention_bias");
    c.erase("mlp_bias");
    std::ofstream(hf + "/config.json") << c.dump(1);
  }
  return hf;
}

// Token ids of a short greedy continuation.
std::string continuation(const std::string& model) {
  const CommandResult r =
      run_shrike("generate -m " + model + " -p 'where is my order' -n 4 --temp 0 --ids");
  EXPECT_EQ(r.exit_code, 0) << model << "\n" << r.err;
  return r.out;
}

TEST_P(RealArchCli, EveryCompressionCommandReadsTheFolderDirectly) {
  const Shape s = GetParam();
  const std::string hf = make_folder(s, dir_);
  const std::string data = path("data/train.jsonl");
  const std::string out = path(s.name);
  std::filesystem::create_directories(out);
  ok("quantize " + hf + " -o " + out + "/gptq.gguf --type q8_0 --method gptq --calib " + data +
     " --calib-limit 16");
  ok("quantize " + hf + " -o " + out + "/awq.gguf --type q4_0 --method awq --calib " + data +
     " --calib-limit 16");
  // Depth, width, heads and FFN together; heads and width by the same fraction keep
  // heads x head size equal to the width (what llama.cpp's qwen2 graph needs).
  ok("prune " + hf + " -o " + out + "/pruned.gguf --calib " + data +
     " --calib-limit 16 --layers 1 --hidden 0.5 --heads 0.5 --ffn 0.5");
  ok("distill --teacher " + hf + " --student " + out + "/pruned.gguf --data " + data +
     " --epochs 1 -o " + out + "/student.gguf");
  ok("distill --teacher " + hf +
     " --student-preset draft --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn 64 --data " + data +
     " --epochs 1 -o " + out + "/draft.gguf");

  for (const char* name : {"gptq", "awq", "pruned", "student", "draft"}) {
    const std::string file = out + "/" + name + ".gguf";
    SCOPED_TRACE(file);
    EXPECT_FALSE(continuation(file).empty());
    const auto f = gguf::GgufFile::open(file);
    EXPECT_EQ(f.get_string_or("tokenizer.chat_template", ""), kTemplate);
    EXPECT_EQ(f.get_string("general.architecture"), s.model_type == "qwen2" ? "qwen2" : "llama");
    // The draft is a fresh shape of its own; every other file keeps the teacher's rotation.
    if (std::string(name) != "draft") {
      EXPECT_EQ(f.find_tensor("rope_freqs.weight") != nullptr, s.name == "llama3");
    }
  }
  const auto pruned = gguf::GgufFile::open(out + "/pruned.gguf");
  const std::string arch = pruned.get_string("general.architecture");
  EXPECT_EQ(pruned.get_uint(arch + ".block_count"), 2u);
  EXPECT_EQ(pruned.get_uint(arch + ".embedding_length"), 32u);

  // The student back out as a folder: the same continuation as its GGUF.
  ok("export-hf " + out + "/student.gguf -o " + out + "/student-hf --type f32");
  EXPECT_EQ(continuation(out + "/student-hf"), continuation(out + "/student.gguf"));
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, RealArchCli,
    ::testing::Values(Shape{"qwen2", "--arch qwen2 --vocab 151936 --vocab-type qwen2 --tied",
                            "qwen2"},
                      Shape{"llama3",
                            "--vocab 128256 --vocab-type llama-bpe --tied --rope-theta 500000 "
                            "--llama3-rope-factor 32 --llama3-rope-original 64",
                            "llama"},
                      Shape{"mistral", "--vocab 32000 --vocab-type spm", "mistral"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace shrike
