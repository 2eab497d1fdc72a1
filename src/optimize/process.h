// Child processes for `shrike optimize`: every model is built by, served by and measured by a real
// `shrike` subcommand. A Child is killed (SIGTERM, then SIGKILL) when it goes out of scope, and the
// kernel kills it if this process dies first (PR_SET_PDEATHSIG), so no server outlives a run.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace shrike::optimize {

class Child {
 public:
  // Starts argv[0] (a path) with stdout and stderr appended to log_path, in this process's
  // environment with each "KEY=value" of env set. Throws std::runtime_error when the log cannot
  // be opened or the fork fails; an exec failure shows as exit code 127 with the reason in the
  // log.
  Child(const std::vector<std::string>& argv, const std::string& log_path,
        const std::vector<std::string>& env = {});
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The exit status (128 + signal when killed by one) once it has exited; nullopt while running.
  std::optional<int> poll();
  // Waits up to timeout_s; nullopt when it is still running then.
  std::optional<int> wait(double timeout_s);
  // SIGTERM, up to grace_s for it to exit, then SIGKILL. Returns the exit status.
  int stop(double grace_s);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs a command to completion, its output appended to log_path. Throws std::runtime_error
// naming the command and the log when it fails, or when it runs past timeout_s (then killed).
void run_checked(const std::vector<std::string>& argv, const std::string& log_path,
                 double timeout_s, const std::vector<std::string>& env = {});

// The environment of a `shrike` child that does no BLAS work (serve, loadtest): OpenBLAS starts
// its worker threads when the binary loads, and they spin (sched_yield) for ~0.1 s before they
// sleep; on a 2-core machine that spin took a core from the server just as a load test began,
// and made the first requests of every run ~100 ms late.
const std::vector<std::string>& no_blas_threads_env();

// The last max_lines lines of a file ("" when unreadable): error messages quote the log.
std::string tail_of(const std::string& path, int max_lines);

// This process's own binary (/proc/self/exe): the `shrike` whose subcommands do the work.
// Throws std::runtime_error when it cannot be read.
std::string current_executable();

// "a b 'c d'": a command as a shell would need it, for logs and the report.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace shrike::optimize
