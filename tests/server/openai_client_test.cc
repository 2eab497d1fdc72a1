// Acceptance 5: the official openai npm package against `shrike serve`. The package is installed
// by scripts/setup.sh (npm install --prefix tests/server/openai_client). A missing node or
// package fails the test with the fix: CI has both, so a silent skip would hide a broken set-up.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "run_shrike.h"
#include "server_process.h"

namespace shrike::testing {
namespace {

namespace fs = std::filesystem;

struct Output {
  int exit_code = -1;
  std::string text;
};

Output shell(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  const int status = pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

TEST(OpenAiClient, OfficialNodePackageTalksToShrike) {
  const fs::path client_dir = fs::path(SHRIKE_SOURCE_DIR) / "tests/server/openai_client";
  const Output node = shell("node --version");
  ASSERT_EQ(node.exit_code, 0) << "Node.js is needed for this test (Node 20+): " << node.text;
  ASSERT_TRUE(fs::exists(client_dir / "node_modules/openai/package.json"))
      << "the openai npm package is not installed; run scripts/setup.sh or: npm install --prefix "
      << client_dir.string() << " --no-audit --no-fund";

  const fs::path dir =
      fs::temp_directory_path() / ("shrike_openai_client_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string();
  const auto synth = run_shrike(
      "synth --dim 64 --layers 2 --heads 4 --ffn 128 --vocab 512 "
      "--context 256 --type f32 -o " +
      model);
  ASSERT_EQ(synth.exit_code, 0) << synth.err;

  ServerProcess server;
  ASSERT_TRUE(server.start({model, "--api-key", "sk-node", "--model-name", "shrike-tiny",
                            "--chat-template", "chatml", "--threads", "1"}))
      << server.log();
  const Output run =
      shell("cd " + client_dir.string() +
            " && SHRIKE_BASE_URL=http://127.0.0.1:" + std::to_string(server.port()) +
            "/v1 SHRIKE_API_KEY=sk-node SHRIKE_MODEL=shrike-tiny timeout 120 node test.mjs");
  EXPECT_EQ(run.exit_code, 0) << run.text << "\nserver log:\n" << server.log();
  std::printf("%s", run.text.c_str());
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30), 0) << server.log();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shrike::testing
