// Running the built `shrike` binary from a test, as a user would, with stdout and stderr captured
// separately.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace shrike::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when the process could not be started or did not exit normally
  std::string out, err;
};

// Runs `shrike ARGS` (ARGS already shell-quoted).
inline CommandResult run_shrike(const std::string& args) {
  const auto err_path = std::filesystem::temp_directory_path() /
                        ("shrike_test_" + std::to_string(getpid()) + ".stderr");
  const std::string cmd = std::string(SHRIKE_BINARY) + " " + args + " 2>" + err_path.string();
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace shrike::testing
