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

TEST_F(QuantizeCli, ScanProposesARecipe) {
  const CommandResult r = ok("quantize " + path("in.gguf") + " --scan --type q4_0 --calib " +
                             path("calib.txt") + " --recipe-max 2");
  EXPECT_NE(r.out.find("all matrices quantised"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recipe: --keep '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=q8_0'"), std::string::npos) << r.out;
}

TEST_F(QuantizeCli, BadOptionsAndInputsFailClearly) {
  const std::string in = path("in.gguf");
  fails("quantize " + in + " -o " + path("x.gguf") + " --type q5_k", "'q5_k' is not a type");
  fails("quantize " + in + " -o " + path("x.gguf") + " --method awq", "needs --calib");
  fails("quantize " + in + " -o " + path("x.gguf") + " --method best", "expected rtn, awq or gptq");
  fails("quantize " + in + " -o " + path("x.gguf") + " --keep 'blk.*'", "expected PATTERN=TYPE");
  fails("quantize " + in + " --type q4_0", "-o/--output is required");
  fails("quantize " + path("missing.gguf") + " -o " + path("x.gguf"), "missing.gguf", 2);
  std::ofstream(path("junk.gguf")) << "not a gguf file";
  fails("quantize " + path("junk.gguf") + " -o " + path("x.gguf"), "junk.gguf", 2);
  fails(
      "quantize " + in + " -o " + path("x.gguf") + " --method gptq --calib " + path("missing.txt"),
      "missing.txt", 2);
}

}  // namespace
}  // namespace shrike
