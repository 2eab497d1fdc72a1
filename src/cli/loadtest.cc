// `shrike loadtest`: drives an OpenAI-compatible server (llama-server, vLLM, shrike later) with a
// closed loop, gamma arrivals or a replayed trace, and reports latency percentiles, throughput,
// errors and goodput.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "core/file_buffer.h"
#include "loadtest/client.h"
#include "loadtest/report.h"
#include "loadtest/stats.h"
#include "loadtest/trace.h"
#include "loadtest/url.h"

namespace shrike::cli {
namespace {

struct LoadtestArgs {
  std::string url, endpoint = "completions", model;
  bool no_stream = false, allow_remote = false, stop_at_eos = false;
  int concurrency = 0;
  double rate = 0, burstiness = 1;
  uint64_t seed = 0;
  std::string trace, window, prompts, slo, out_json, out_svg;
  double speedup = 1, length_scale = 1;
  int64_t input_tokens = 128, output_tokens = 128, max_requests = 0;
  double duration = 0, timeout = 600;
};

std::atomic<bool> g_loadtest_stop{false};
// First Ctrl-C: stop sending and let in-flight requests finish (the report still comes); second:
// die as usual.
void on_loadtest_sigint(int) {
  if (g_loadtest_stop.exchange(true)) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw FileError(path + ": cannot write");
}

int run_loadtest(const LoadtestArgs& a) {
  using namespace loadtest;
  check_url_allowed(a.url, a.allow_remote);
  const int modes = (a.concurrency > 0) + (a.rate > 0) + !a.trace.empty();
  if (modes > 1) throw std::invalid_argument("choose one of --concurrency, --rate, --trace");
  RunConfig cfg;
  cfg.chat = a.endpoint == "chat";
  cfg.intent = a.endpoint == "intent";
  cfg.url = cfg.intent ? intent_url(a.url) : endpoint_url(a.url, cfg.chat);
  cfg.stream = !a.no_stream && !cfg.intent;
  cfg.ignore_eos = !a.stop_at_eos;
  cfg.model = a.model;
  cfg.timeout_s = a.timeout;
  cfg.max_requests = a.max_requests;
  cfg.duration_s = a.duration;
  cfg.seed = a.seed;
  cfg.progress = isatty(STDERR_FILENO);
  cfg.stop = &g_loadtest_stop;
  if (!a.prompts.empty()) cfg.prompts = read_prompts(a.prompts);
  const Slo slo = a.slo.empty() ? Slo{} : parse_slo(a.slo);

  Schedule sched;
  ReportContext ctx;
  char buf[256];
  if (!a.trace.empty()) {
    double w0 = 0, w1 = 0;
    if (!a.window.empty() && std::sscanf(a.window.c_str(), "%lf:%lf", &w0, &w1) != 2)
      throw std::invalid_argument("--window: expected START:END in trace seconds");
    auto entries = transform_trace(read_trace(a.trace), a.speedup, a.length_scale, w0, w1);
    if (entries.empty()) throw std::invalid_argument("--window selects no request of " + a.trace);
    std::snprintf(buf, sizeof buf, "trace %s (%zu requests), speedup %g, length scale %g%s",
                  a.trace.c_str(), entries.size(), a.speedup, a.length_scale,
                  a.window.empty() ? "" : (", window " + a.window + " s").c_str());
    sched = trace_schedule(std::move(entries));
  } else {
    if (a.max_requests == 0 && a.duration <= 0)
      throw std::invalid_argument("without --trace, give --max-requests or --duration");
    if (a.rate > 0) {
      sched = rate_schedule(a.rate, a.burstiness, a.seed, a.input_tokens, a.output_tokens);
      std::snprintf(buf, sizeof buf, "open loop, %g req/s, gamma burstiness %g, seed %llu", a.rate,
                    a.burstiness, (unsigned long long)a.seed);
    } else {
      const int n = a.concurrency > 0 ? a.concurrency : 1;
      sched = closed_loop_schedule(n, a.input_tokens, a.output_tokens);
      std::snprintf(buf, sizeof buf, "closed loop, concurrency %d", n);
    }
    if (a.prompts.empty())
      ctx.mode = std::string(buf) + ", " + std::to_string(a.input_tokens) + " prompt / " +
                 std::to_string(a.output_tokens) + " output tokens";
  }
  if (ctx.mode.empty()) ctx.mode = buf;
  ctx.url = cfg.url;
  ctx.chat = cfg.chat;
  ctx.stream = cfg.stream;
  ctx.synthetic_prompts = cfg.prompts.empty();
  ctx.slo = slo;

  // Each open stream is a socket: lift the soft descriptor limit (often 1024) to the hard one.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  auto old = std::signal(SIGINT, on_loadtest_sigint);
  const auto run = run_load(cfg, sched);
  std::signal(SIGINT, old);
  const auto s = summarise(run, slo);
  std::printf("%s", markdown_report(s, ctx).c_str());
  if (!a.out_json.empty()) write_file(a.out_json, json_report(run, s, ctx).dump(1) + "\n");
  if (!a.out_svg.empty()) write_file(a.out_svg, svg_cdf(run));
  return 0;
}

}  // namespace

Runner add_loadtest(CLI::App& app) {
  auto a = std::make_shared<LoadtestArgs>();
  app.footer(
      "Synthesised prompts are common English words, each about one token in Llama 2/3 "
      "vocabularies, so prompt lengths are approximate (the report uses the server's usage "
      "counts when sent). Only loopback servers unless --allow-remote.");
  app.add_option("--url", a->url, "server base URL, e.g. http://127.0.0.1:8080")->required();
  app.add_option("--endpoint", a->endpoint,
                 "completions, chat, or intent (a task model's POST /v1/intent {\"text\": "
                 "prompt}; not streamed)")
      ->check(CLI::IsMember({"completions", "chat", "intent"}));
  app.add_flag("--no-stream", a->no_stream, "plain JSON responses instead of SSE streaming");
  app.add_flag("--stop-at-eos", a->stop_at_eos,
               "let answers end at EOS (default: ignore_eos, exactly max_tokens each)");
  app.add_option("--model", a->model,
                 "model name sent in requests (default: none, the server's own)");
  app.add_option("--concurrency", a->concurrency, "closed loop: N requests outstanding")
      ->check(CLI::PositiveNumber);
  app.add_option("--rate", a->rate, "open loop: mean arrivals per second")
      ->check(CLI::PositiveNumber);
  app.add_option("--burstiness", a->burstiness,
                 "gamma shape of arrival gaps (1 Poisson, <1 burstier)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", a->seed, "seed for arrivals and prompts");
  app.add_option("--trace", a->trace, "replay a trace (Azure 2023 CSV, Mooncake or shrike JSONL)");
  app.add_option("--speedup", a->speedup, "divide trace times by X")->check(CLI::PositiveNumber);
  app.add_option("--length-scale", a->length_scale, "multiply trace token counts by L")
      ->check(CLI::PositiveNumber);
  app.add_option("--window", a->window, "replay only trace seconds A:B");
  app.add_option("--input-tokens", a->input_tokens, "prompt tokens (without --trace)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--output-tokens", a->output_tokens, "max_tokens (without --trace)")
      ->check(CLI::PositiveNumber);
  app.add_option("--prompts", a->prompts, "JSONL of {\"prompt\": ..., \"max_tokens\"?: n}");
  app.add_option("--timeout", a->timeout, "per-request timeout, seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-requests", a->max_requests, "stop after sending N")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--duration", a->duration, "stop sending after S seconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slo", a->slo, "goodput objectives, e.g. ttft=500,tpot=50,e2e=10000 (ms)");
  app.add_option("--out-json", a->out_json, "write every request's record as JSON");
  app.add_option("--out-svg", a->out_svg, "write latency CDFs as SVG");
  app.add_flag("--allow-remote", a->allow_remote, "allow a non-loopback server");
  return [a] { return run_loadtest(*a); };
}

}  // namespace shrike::cli
