// `shrike quantize` as a user runs it: each method on a tiny random model with a calibration
// file, the sensitivity scan's recipe, and clear errors (exit 2) for bad options and inputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_shrike.h"

namespace shrike {
namespace {

using testing::CommandResult;
using testing::run_shrike;

class QuantizeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (std::filesystem::temp_directory_path() /
            ("shrike_quantize_cli_" + std::to_string(getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    ok("synth --dim 128 --layers 2 --heads 4 --kv-heads 2 --ffn 256 --vocab 300 --context 128 "
       "--type f32 --seed 5 -o " +
       path("in.gguf"));
    std::ofstream calib(path("calib.txt"));
    for (int i = 0; i < 20; ++i)
      calib << "Once upon a time a small fox ran along the river bank, looking at the fish and "
               "the birds, and every evening it went home to sleep under the old tree. ";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string path(const std::string& name) { return dir_ + "/" + name; }
  static CommandResult ok(const std::string& args) {
    CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, 0) << "shrike " << args << "\n" << r.err;
    return r;
  }
  // Exit code 1 for a bad option, 2 for a bad file (the CLI's convention).
  static void fails(const std::string& args, const std::string& message, int code = 1) {
    const CommandResult r = run_shrike(args);
    EXPECT_EQ(r.exit_code, code) << "shrike " << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  static inline std::string dir_;
};

TEST_F(QuantizeCli, EveryMethodWritesALoadableModel) {
  for (const std::string m : {"rtn", "awq", "gptq"}) {
    const std::string out = path("q4-" + m + ".gguf");
    const CommandResult r =
        ok("quantize " + path("in.gguf") + " -o " + out + " --type q4_g128 --method " + m +
           " --calib " + path("calib.txt") + " --keep 'blk.0.attn_*=q8_c'");
    EXPECT_NE(r.err.find("matrices:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("q8_c"), std::string::npos) << r.err;
    if (m == "awq") {
      EXPECT_NE(r.err.find("awq blk.0.attn_in alpha="), std::string::npos) << r.err;
    }
    ok("generate -m " + out + " -p hello -n 4");
  }
}

// llama.cpp's Q4_K_M mix: output.weight, and attn_v / ffn_down of layers 0, 3, 6 and 7 of 8
// (llama.cpp's use_more_bits) in q6_K, the rest q4_K; rows not a multiple of 256 fall back to
// q8_0. Written by round to nearest and by GPTQ, and run.
TEST_F(QuantizeCli, WritesTheKQuantMixes) {
  ok("synth --dim 256 --layers 8 --heads 4 --kv-heads 2 --ffn 512 --vocab 300 --context 128 "
     "--type f16 --seed 3 -o " +
     path("k.gguf"));
  for (const std::string m : {"rtn", "gptq"}) {
    const std::string out = path("k-q4km-" + m + ".gguf");
    const CommandResult r = ok("quantize " + path("k.gguf") + " -o " + out +
                               " --type q4_K_M --method " + m + " --calib " + path("calib.txt"));
    // 8 layers x 7 matrices, token_embd (q4_K, as llama.cpp has it) and output: 58 matrices.
    EXPECT_NE(r.err.find("49 q4_K 9 q6_K"), std::string::npos) << r.err;
    ok("generate -m " + out + " -p hello -n 4");
  }
  const CommandResult q6 =
      ok("quantize " + path("k.gguf") + " -o " + path("k-q6.gguf") + " --type q6_K");
  EXPECT_NE(q6.err.find("58 q6_K"), std::string::npos) << q6.err;
  const CommandResult fallback =
      ok("quantize " + path("in.gguf") + " -o " + path("in-q5.gguf") + " --type q5_K_M");
  EXPECT_NE(fallback.err.find("fallback: rows of 128 values cannot be q5_K"), std::string::npos)
      << fallback.err;
  ok("generate -m " + path("in-q5.gguf") + " -p hello -n 4");
}

TEST_F(QuantizeCli, ScanProposesARecipe) {
  const CommandResult r = ok("quantize " + path("in.gguf") + " --scan --type q4_0 --calib " +
                             path("calib.txt") + " --recipe-max 2");
  EXPECT_NE(r.out.find("all matrices quantised"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recipe: --keep '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=q8_0'"), std::string::npos) << r.out;
}

// The worst whitened energy `--coverage` reports (the number after "whitened energy" on its
// last line).
double worst_whitened_energy(const std::string& out) {
  const size_t at = out.find("worst: ");
  if (at == std::string::npos) return -1;
  const size_t e = out.find("whitened energy ", at);
  return e == std::string::npos ? -1 : std::stod(out.substr(e + 16));
}

TEST_F(QuantizeCli, CoverageTellsTrafficLikeCalibrationFromTrafficUnlikeIt) {
  std::ofstream(path("digits.txt")) << std::string(2000, '7') << " 0123 4567 89 ## %% $$ !! ??";
  const CommandResult self = ok("quantize " + path("in.gguf") + " --calib " + path("calib.txt") +
                                " --coverage " + path("calib.txt"));
  for (const char* input :
       {"blk.0.attn_in", "blk.0.attn_out_in", "blk.1.ffn_in", "blk.1.ffn_down_in"})
    EXPECT_NE(self.out.find(input), std::string::npos) << self.out;
  const CommandResult other = ok("quantize " + path("in.gguf") + " --calib " + path("calib.txt") +
                                 " --coverage " + path("digits.txt"));
  const double covered = worst_whitened_energy(self.out),
               uncovered = worst_whitened_energy(other.out);
  // Traffic identical to calibration: at most 1 (damping only lowers it).
  EXPECT_GT(covered, 0.0) << self.out;
  EXPECT_LE(covered, 1.0) << self.out;
  EXPECT_GT(uncovered, 2 * covered) << other.out;
}

TEST_F(QuantizeCli, BadOptionsAndInputsFailClearly) {
  const std::string in = path("in.gguf");
  fails("quantize " + in + " -o " + path("x.gguf") + " --type q7_k", "'q7_k' is not a type");
  // Read, not written: said so, not "not a type".
  fails("quantize " + in + " -o " + path("x.gguf") + " --type q2_k",
        "shrike reads q2_K but does not write it");
  fails("quantize " + in + " -o " + path("x.gguf") + " --type q6_K_M", "'q6_K_M' is not a type");
  fails("quantize " + in + " -o " + path("x.gguf") + " --method awq", "needs --calib");
  fails("quantize " + in + " -o " + path("x.gguf") + " --method best", "expected rtn, awq or gptq");
  fails("quantize " + in + " -o " + path("x.gguf") + " --keep 'blk.*'", "expected PATTERN=TYPE");
  fails("quantize " + in + " --type q4_0", "-o/--output is required");
  fails("quantize " + in + " --coverage " + path("calib.txt"), "--coverage needs --calib");
  fails("quantize " + in + " --calib " + path("calib.txt") + " --coverage " + path("none.jsonl"),
        "none.jsonl", 2);
  fails("quantize " + path("missing.gguf") + " -o " + path("x.gguf"), "missing.gguf", 2);
  std::ofstream(path("junk.gguf")) << "not a gguf file";
  fails("quantize " + path("junk.gguf") + " -o " + path("x.gguf"), "junk.gguf", 2);
  fails(
      "quantize " + in + " -o " + path("x.gguf") + " --method gptq --calib " + path("missing.txt"),
      "missing.txt", 2);
}

}  // namespace
}  // namespace shrike
