#!/usr/bin/env python3
"""The seed's last line as a measurement (issue 29, point 3): how many instances of the final
service fit in the memory one stage-0 instance takes, and those "business lines" served together
by one `shrike serve` (several models, one KV budget) under bursty load, each line's P99 against
the latency budget.

    scripts/business_lines.py OPT_DIR [--lines N] [--rate R] [--seconds S] [--port P]

OPT_DIR is a `shrike optimize` output folder (report.json, prompts.jsonl, the models). Each line
is its own copy of the last stage's model file (a separate file, so no line shares another's
pages), served under its own name with the last stage's options; every line gets an open-loop
load test of its own at R requests per second (default: the last stage's highest rate within
the budget alone, divided by 8 x the number of lines: several models do not batch together, each
steps on its own, and on 2 cores 8 lines at a quarter of that rate in all missed; see
docs/RESULTS.md), after 4 warm-up requests per line, with gamma arrivals of the report's burstiness, all
at the same time. Writes OPT_DIR/business_lines.md and .json; exits 1 when a line misses.
"""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request


def fail(msg):
    print(f"business_lines: {msg}", file=sys.stderr)
    sys.exit(2)


def vm_hwm_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("opt_dir")
    ap.add_argument("--lines", type=int, default=0, help="lines served (0: as many as fit)")
    ap.add_argument("--rate", type=float, default=0, help="requests per second per line")
    ap.add_argument("--seconds", type=float, default=20, help="seconds of arrivals per line")
    ap.add_argument("--port", type=int, default=18929)
    a = ap.parse_args()

    report_path = os.path.join(a.opt_dir, "report.json")
    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{report_path}: {e}")
    stages = [s for s in report.get("stages", []) if s.get("available")]
    if len(stages) < 2:
        fail(f"{report_path}: fewer than two measured stages")
    first, last = stages[0], stages[-1]
    rss0, rss_last = first.get("peak_rss_bytes") or 0, last.get("peak_rss_bytes") or 0
    if rss0 <= 0 or rss_last <= 0:
        fail(f"{report_path}: a stage without peak_rss_bytes")
    fit = max(1, math.floor(rss0 / rss_last))
    lines = a.lines or fit
    budget_ms = report["budget_ms"]
    best = last.get("max_rate_within_budget") or 0
    rate = a.rate or (best / (8 * lines) if best > 0 else 1.0)
    burstiness = report.get("burstiness", 0.3)
    shrike = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "shrike")

    # The last stage's serve command: its model file becomes one copy per line.
    argv = list(last["serve_argv"])
    model = next((x for x in argv[2:] if x.endswith(".gguf") and not x.startswith("-")), None)
    if model is None:
        fail("the last stage's serve command names no .gguf model")
    model_path = model if os.path.isabs(model) else os.path.join(os.getcwd(), model)
    line_dir = os.path.join(a.opt_dir, "lines")
    os.makedirs(line_dir, exist_ok=True)
    names = []
    for i in range(lines):
        dst = os.path.join(line_dir, f"line{i + 1}.gguf")
        if not os.path.exists(dst) or os.path.getsize(dst) != os.path.getsize(model_path):
            shutil.copyfile(model_path, dst)
        names.append((f"line{i + 1}", dst))
    rest = [x for x in argv[2:] if x != model]  # argv: shrike serve MODEL OPTIONS...
    # One KV budget shared by several models needs a paged cache type: int8-mixed (its f16
    # copies of important tokens live beside the pool) becomes plain int8 here, and says so.
    kv_note = ""
    if "--kv-type" in rest and rest[rest.index("--kv-type") + 1] == "int8-mixed":
        rest[rest.index("--kv-type") + 1] = "int8"
        kv_note = ("the last stage's int8-mixed KV served as int8: a KV budget shared by "
                   "several models needs a paged cache type")
    cmd = [shrike, "serve"] + [f"{n}={p}" for n, p in names] + rest
    cmd += ["--host", "127.0.0.1", "--port", str(a.port)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    log = open(os.path.join(a.opt_dir, "logs", "business_lines.serve.log"), "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{a.port}"
    try:
        for _ in range(600):
            if server.poll() is not None:
                fail(f"shrike serve exited ({server.returncode}); see {log.name}")
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        else:
            fail("shrike serve did not answer /health in 120 s")
        prompts = os.path.join(a.opt_dir, "prompts.jsonl")
        # Warm-up, as the staged report's own runs have: each line answers a few requests first
        # (first-touch of its weights and KV pages is not what a loaded service pays).
        with open(prompts) as f:
            warm = [json.loads(l) for _, l in zip(range(4), f)]
        for name, _ in names:
            for w in warm:
                body = json.dumps({"model": name, "prompt": w["prompt"],
                                   "max_tokens": w.get("max_tokens", 64), "temperature": 0})
                req = urllib.request.Request(url + "/v1/completions", data=body.encode(),
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=30).read()
        tests = []
        for i, (name, _) in enumerate(names):
            out = os.path.join(a.opt_dir, "logs", f"business_{name}.json")
            t = [shrike, "loadtest", "--url", url, "--model", name, "--prompts", prompts,
                 "--stop-at-eos", "--rate", f"{rate:.4f}", "--burstiness", str(burstiness),
                 "--duration", str(a.seconds), "--seed", str(i + 1), "--timeout", "5",
                 "--slo", f"e2e={budget_ms:g}", "--out-json", out]
            tests.append((name, out, subprocess.Popen(t, stdout=subprocess.DEVNULL,
                                                      stderr=subprocess.PIPE, env=env)))
        results = []
        for name, out, p in tests:
            _, err = p.communicate()
            if p.returncode != 0:
                fail(f"loadtest of {name} failed: {err.decode(errors='replace')[-400:]}")
            with open(out) as f:
                s = json.load(f)["summary"]
            results.append({"line": name, "sent": s["sent"], "completed": s["completed"],
                            "p50_ms": s["e2e"]["p50_ms"], "p99_ms": s["e2e"]["p99_ms"],
                            "within_budget": s["good"] / s["sent"] if s["sent"] else 0,
                            "timeouts": s["timed_out"], "failed": s["failed"]})
        hwm = vm_hwm_bytes(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()

    ok = all(r["p99_ms"] is not None and r["p99_ms"] <= budget_ms and r["failed"] == 0
             and r["timeouts"] == 0 for r in results)
    mb = lambda b: f"{b / 2**20:.1f} MiB"
    md = ["## Business lines: the final service, as many times as one stage-0 instance's memory holds", ""]
    md.append(f"- stage 0 (`{first['name']}`) peak RSS {mb(rss0)}; stage {last['id']} "
              f"(`{last['name']}`) peak RSS {mb(rss_last)}: **{fit}** instances fit in one "
              f"stage-0 instance's memory")
    md.append(f"- served together: {lines} lines, one `shrike serve` ({mb(hwm)} peak RSS, "
              f"{hwm / rss0:.2f}x stage 0's), each its own copy of the model file")
    md.append(f"- load: every line at {rate:.2f} req/s (gamma arrivals, burstiness {burstiness:g}) "
              f"for {a.seconds:g} s, all at once; budget {budget_ms:g} ms end to end")
    if kv_note:
        md.append(f"- {kv_note}")
    md.append(f"- serve command: `{' '.join(['shrike', 'serve'] + cmd[2:])}`")
    md.append(f"- command: `scripts/business_lines.py {a.opt_dir}`" +
              (f" --lines {a.lines}" if a.lines else "") + (f" --rate {a.rate:g}" if a.rate else ""))
    md += ["", "| line | requests | P50 ms | P99 ms | within budget | timeouts | failed |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        md.append(f"| {r['line']} | {r['sent']} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                  f"{100 * r['within_budget']:.1f}% | {r['timeouts']} | {r['failed']} |")
    md += ["", f"Verdict: every line's P99 within {budget_ms:g} ms: **{'yes' if ok else 'no'}**", ""]
    with open(os.path.join(a.opt_dir, "business_lines.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(a.opt_dir, "business_lines.json"), "w") as f:
        json.dump({"fit": fit, "lines": lines, "rate_per_line": rate, "seconds": a.seconds,
                   "stage0_peak_rss_bytes": rss0, "last_peak_rss_bytes": rss_last,
                   "server_peak_rss_bytes": hwm, "budget_ms": budget_ms, "all_within": ok,
                   "results": results}, f, indent=1)
    print("\n".join(md))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
