// `shrike soak`: mixed, partly hostile traffic against `shrike serve` for a bounded time, with a
// verdict per criterion (src/loadtest/soak.h). It starts the server itself (--serve MODEL, as
// `shrike optimize` does: a child on 127.0.0.1 and a free port, with a small queue so bursts go
// above capacity) or is pointed at one (--url, --pid for its memory). Exit code 3 when a
// criterion fails.
#include "loadtest/soak.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "core/file_buffer.h"
#include "optimize/process.h"
#include "optimize/served.h"

namespace shrike::cli {
namespace {

struct SoakArgs {
  std::string serve_model, url, model, out, log;
  std::vector<std::string> serve_args;
  int pid = 0, max_seqs = 4, max_queue = 8, max_body_mb = 1;
  bool quiet = false;
  loadtest::SoakConfig cfg;
};

std::atomic<bool> g_soak_stop{false};
void on_soak_sigint(int) {
  if (g_soak_stop.exchange(true)) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

int run_soak_command(SoakArgs& a) {
  using namespace loadtest;
  if (a.serve_model.empty() == a.url.empty())
    throw std::invalid_argument("soak: give either --serve MODEL or --url URL");
  SoakConfig cfg = a.cfg;
  cfg.model = a.model;
  cfg.progress = !a.quiet;
  cfg.stop = &g_soak_stop;
  std::unique_ptr<optimize::ServedModel> served;
  if (!a.serve_model.empty()) {
    std::vector<std::string> args = {"--max-seqs",    std::to_string(a.max_seqs),
                                     "--max-queue",   std::to_string(a.max_queue),
                                     "--max-body-mb", std::to_string(a.max_body_mb)};
    args.insert(args.end(), a.serve_args.begin(), a.serve_args.end());
    const std::string log =
        a.log.empty() ? "/tmp/shrike_soak_" + std::to_string(getpid()) + ".log" : a.log;
    served = std::make_unique<optimize::ServedModel>(optimize::current_executable(), a.serve_model,
                                                     args, log, 120);
    std::fprintf(stderr, "soak: serving %s at %s (pid %d, log %s)\n", a.serve_model.c_str(),
                 served->url().c_str(), int(served->pid()), log.c_str());
    cfg.base_url = served->url();
    cfg.server_pid = served->pid();
  } else {
    cfg.base_url = a.url;
    cfg.server_pid = a.pid;
  }
  cfg.max_body_bytes = int64_t(a.max_body_mb) << 20;
  std::signal(SIGINT, on_soak_sigint);
  const SoakSummary summary = run_soak(cfg);
  std::signal(SIGINT, SIG_DFL);
  auto verdicts = soak_verdicts(summary, cfg.max_rss_growth);
  if (served) {
    // The drain is part of what is tested: SIGTERM with nothing running must exit 0 promptly.
    const int status = served->stop(30);
    verdicts.push_back({"the server drained and exited 0 on SIGTERM",
                        "exit status " + std::to_string(status), status == 0});
  }
  const std::string report = soak_report(summary, verdicts);
  std::fputs(report.c_str(), stdout);
  if (!a.out.empty()) {
    std::ofstream out(a.out, std::ios::binary);
    out << report;
    if (!out) throw FileError(a.out + ": cannot write");
  }
  for (const auto& v : verdicts)
    if (!v.pass) return 3;
  return 0;
}

}  // namespace

Runner add_soak(CLI::App& app) {
  auto a = std::make_shared<SoakArgs>();
  auto& c = a->cfg;
  app.add_option("--serve", a->serve_model,
                 "start `shrike serve MODEL` on 127.0.0.1 and a free port and soak it");
  app.add_option("--serve-arg", a->serve_args,
                 "one more argument for that server (repeat: --serve-arg --threads --serve-arg 1)")
      ->allow_extra_args(false);
  app.add_option("--max-seqs", a->max_seqs, "--serve: the server's --max-seqs")
      ->check(CLI::Range(1, 4096));
  app.add_option("--max-queue", a->max_queue,
                 "--serve: the server's --max-queue (small, so bursts get 429)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--max-body-mb", a->max_body_mb,
                 "the server's --max-body-mb (--serve passes it; with --url say what it is)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--log", a->log, "--serve: the server's log file");
  app.add_option("--url", a->url, "soak a running server at this loopback base URL instead");
  app.add_option("--pid", a->pid, "--url: the server's process id, for its resident memory");
  app.add_option("--model", a->model, "the model id to name in requests (default: none)");
  app.add_option("--duration", c.duration_s, "seconds of traffic")
      ->required()
      ->check(CLI::Range(1.0, 7 * 86400.0));
  app.add_option("--max-requests", c.max_requests, "stop after the steady clients sent N")
      ->check(CLI::PositiveNumber);
  app.add_option("--clients", c.clients, "steady clients, one request at a time each")
      ->check(CLI::Range(1, 512));
  app.add_option("--burst-every", c.burst_every_s, "seconds between bursts")
      ->check(CLI::PositiveNumber);
  app.add_option("--burst-size", c.burst_size, "requests sent at once in a burst (0: none)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--disconnect-share", c.disconnect_share,
                 "share of requests whose client leaves mid-stream")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--malformed-share", c.malformed_share, "share of malformed requests")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--deadline-share", c.deadline_share, "share of requests with a short `timeout`")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--long-prompt-share", c.long_prompt_share,
                 "share of prompts exactly at the context limit")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-rss-growth", c.max_rss_growth,
                 "allowed resident memory growth after the warm-up (fraction)")
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--warmup-share", c.warmup_share,
                 "share of the run before the memory baseline is taken")
      ->check(CLI::Range(0.0, 0.9));
  app.add_option("--seed", c.seed, "seed of the traffic mix");
  app.add_option("--out", a->out, "also write the Markdown report here");
  app.add_flag("--quiet", a->quiet, "no progress lines on stderr");
  return [a] { return run_soak_command(*a); };
}

}  // namespace shrike::cli
