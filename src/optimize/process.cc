#include "optimize/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace shrike::optimize {
namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

Child::Child(const std::vector<std::string>& argv, const std::string& log_path,
             const std::vector<std::string>& env) {
  if (argv.empty()) throw std::invalid_argument("Child: empty command");
  // The child's environment: this process's, with each "KEY=value" of env replacing its key.
  std::vector<std::string> vars = env;
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    const std::string key = v.substr(0, v.find('=') + 1);
    bool replaced = false;
    for (const auto& o : env) replaced = replaced || o.rfind(key, 0) == 0;
    if (!replaced) vars.push_back(v);
  }
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(log_path + ": cannot open log: " + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    close(fd);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    // Only async-signal-safe calls from here to exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execve(args[0], args.data(), envp.data());
    const char msg[] = "exec failed\n";
    [[maybe_unused]] ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(127);
  }
  close(fd);
}

Child::~Child() {
  if (!status_) stop(2.0);
}

std::optional<int> Child::poll() {
  if (status_) return status_;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) status_ = decode_status(status);
  return status_;
}

std::optional<int> Child::wait(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!poll()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

int Child::stop(double grace_s) {
  if (poll()) return *status_;
  kill(pid_, SIGTERM);
  if (auto s = wait(grace_s)) return *s;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  status_ = decode_status(status);
  return *status_;
}

std::string tail_of(const std::string& path, int max_lines) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (int(lines.size()) > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "  | " + l + "\n";
  return out;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./=,:+@%") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

void run_checked(const std::vector<std::string>& argv, const std::string& log_path,
                 double timeout_s, const std::vector<std::string>& env) {
  {
    std::ofstream log(log_path, std::ios::app);
    log << "$ " << shell_join(argv) << "\n";
  }
  Child child(argv, log_path, env);
  const auto status = child.wait(timeout_s);
  if (!status) {
    child.stop(2.0);
    throw std::runtime_error(shell_join(argv) + ": still running after " +
                             std::to_string(int(timeout_s)) + " s, killed (log " + log_path +
                             ")\n" + tail_of(log_path, 8));
  }
  if (*status != 0)
    throw std::runtime_error(shell_join(argv) + ": exit status " + std::to_string(*status) +
                             " (log " + log_path + ")\n" + tail_of(log_path, 8));
}

std::string current_executable() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot find the shrike binary (/proc/self/exe)");
  return std::string(buf, size_t(n));
}

const std::vector<std::string>& no_blas_threads_env() {
  static const std::vector<std::string> env = {"OPENBLAS_NUM_THREADS=1"};
  return env;
}

}  // namespace shrike::optimize
