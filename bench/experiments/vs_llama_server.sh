#!/usr/bin/env bash
# shrike's final stage against llama-server on the same bursty replay, as `shrike optimize`
# measured the stages: the optimize run's test prompts in order (same max_tokens, greedy, answers
# end at EOS), P50/P99 at concurrency 1, then the highest gamma-arrival rate (the report's
# burstiness) with the report's fraction of requests within its latency budget, each rate run up
# to the report's repeats and passed on a majority (`shrike max-rate`, the optimize code).
#   bench/experiments/vs_llama_server.sh LLAMA_SERVER_BIN OPT_DIR [OUT]
# OPT_DIR: a finished `shrike optimize` output (report.json, prompts.jsonl, teacher-q8_0.gguf).
# shrike serves the last measured stage exactly as the report ran it (its serve_argv); llama-server
# (built outside this repository, never committed) serves the Q8_0 teacher with as many parallel
# slots as that stage's max_seqs, each of the model's context length. Both get THREADS (default 2)
# threads. A third server, shrike with the same stage's options on the Q8_0 teacher, compares the
# engines on one model. ROUNDS (default 2) rounds, each measuring all three, the order alternating.
# PROBES (default 6, as optimize) rates per search; C1_REQUESTS (default 100) at concurrency 1;
# PROBE_REQUESTS (default 400, as optimize) most requests per run and MAX_RATE (default 4000, as
# optimize) the search's upper bound: raise both when a server passes the bound (">=" in the table).
# Prints a Markdown table (also OUT/table.md); every run's files are under OUT (default
# OPT_DIR/vs_llama_server).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 2 ]; then
  echo "usage: bench/experiments/vs_llama_server.sh LLAMA_SERVER_BIN OPT_DIR [OUT]" >&2
  exit 2
fi
llama=$1
opt=${2%/}
out=${3:-$opt/vs_llama_server}
threads=${THREADS:-2}
rounds=${ROUNDS:-2}
[ -x "$llama" ] || { echo "vs_llama_server: $llama: not an executable (LLAMA_SERVER_BIN)" >&2; exit 2; }
for f in report.json prompts.jsonl teacher-q8_0.gguf; do
  [ -f "$opt/$f" ] || { echo "vs_llama_server: $opt/$f: missing (OPT_DIR must be a finished shrike optimize output)" >&2; exit 2; }
done
[ -x build/shrike ] || { echo "vs_llama_server: build/shrike missing: run scripts/build.sh first" >&2; exit 2; }
mkdir -p "$out"

# What the report ran: the last measured stage's serve command and the measurement's settings.
read -r -a settings < <(python3 - "$opt/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
last = [s for s in r["stages"] if s.get("available")][-1]
o = last["serving_options"]
print(last["id"], r["budget_ms"], r["target"], r["burstiness"], r.get("probe_repeats", 3),
      o["max_seqs"], o["context_length"])
PY
)
stage=${settings[0]} budget=${settings[1]} target=${settings[2]} burst=${settings[3]}
repeats=${settings[4]} slots=${settings[5]} ctx=${settings[6]}
mapfile -t serve_argv < <(python3 - "$opt/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
last = [s for s in r["stages"] if s.get("available")][-1]
for a in last["serve_argv"][2:]:  # without "shrike serve"
    print(a)
PY
)
# The report ran without -t when optimize had no --threads; this comparison fixes both servers'.
for a in "${serve_argv[@]}"; do
  if [ "$a" = "-t" ] || [ "$a" = "--threads" ]; then
    echo "vs_llama_server: the report's stage $stage already sets its threads; using them" >&2
    threads_set=1
  fi
done
[ -n "${threads_set:-}" ] || serve_argv+=(-t "$threads")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_ready() {  # url, pid, log
  for _ in $(seq 1 240); do
    kill -0 "$2" 2>/dev/null || { echo "vs_llama_server: server exited; log $3:" >&2; tail -20 "$3" >&2; exit 1; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0
    sleep 0.5
  done
  echo "vs_llama_server: $1 not ready after 120 s; log $3" >&2
  exit 1
}

# shrike links OpenBLAS, whose threads spin for ~0.1 s when the binary loads; serving needs none
# (max-rate's load tests get the same setting, src/optimize/process.h).
sport=$(free_port)
OPENBLAS_NUM_THREADS=1 build/shrike serve "${serve_argv[@]}" --host 127.0.0.1 --port "$sport" >"$out/shrike.serve.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$sport" "$!" "$out/shrike.serve.log"
# The same stage's serving options on llama-server's model (the Q8_0 teacher): the engines
# compared on one model, apart from what the smaller student buys.
tport=$(free_port)
OPENBLAS_NUM_THREADS=1 build/shrike serve "$opt/teacher-q8_0.gguf" "${serve_argv[@]:1}" --host 127.0.0.1 --port "$tport" \
  >"$out/shrike-teacher.serve.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$tport" "$!" "$out/shrike-teacher.serve.log"
lport=$(free_port)
"$llama" -m "$opt/teacher-q8_0.gguf" -t "$threads" -tb "$threads" -np "$slots" \
  -c $((slots * ctx)) --no-mmap --no-webui --host 127.0.0.1 --port "$lport" \
  >"$out/llama-server.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$lport" "$!" "$out/llama-server.log"
echo "vs_llama_server: shrike stage $stage on :$sport (${serve_argv[*]}), the same on the teacher on" \
  ":$tport, llama-server on :$lport" \
  "(-np $slots -c $((slots * ctx)) -t $threads); $rounds rounds" >&2

measure() {  # name url round
  build/shrike max-rate --url "$2" --prompts "$opt/prompts.jsonl" -o "$out/round$3" --name "$1" \
    --budget-ms "$budget" --target "$target" --burstiness "$burst" --probe-repeats "$repeats" \
    --probes "${PROBES:-6}" --c1-requests "${C1_REQUESTS:-100}" \
    --probe-requests "${PROBE_REQUESTS:-400}" --max-rate "${MAX_RATE:-4000}" >&2
}
declare -A url=([shrike]="http://127.0.0.1:$sport" [shrike-teacher]="http://127.0.0.1:$tport"
  [llama-server]="http://127.0.0.1:$lport")
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="shrike shrike-teacher llama-server"
  else order="llama-server shrike-teacher shrike"; fi
  for name in $order; do measure "$name" "${url[$name]}" "$r"; done
done

python3 - "$out" "$rounds" "$stage" "$budget" "$target" "$burst" <<'PY' | tee "$out/table.md"
import json, statistics, sys
out, rounds, stage, budget, target, burst = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
rows, best = [], {}
for name in ("shrike", "shrike-teacher", "llama-server"):
    for r in range(1, rounds + 1):
        j = json.load(open(f"{out}/round{r}/{name}.json"))
        rate = j["max_rate_within_budget"]
        best.setdefault(name, []).append(rate)
        probes = "; ".join(
            f"{p['rate']:.3g}: " + "/".join(f"{100*x:.1f}" for x in p["runs"]) + (" ok" if p["pass"] else " no")
            for p in j["probes"])
        shown = ("none" if rate <= 0 else (">= " if j["max_rate_is_lower_bound"] else "") + f"{rate:.2f}")
        rows.append(f"| {name} | {r} | {j['c1']['p50_ms']:.1f} | {j['c1']['p99_ms']:.1f} | {shown} | {probes} |")
label = {"shrike": f"shrike, stage {stage} (its model)", "shrike-teacher": f"shrike, stage {stage} options, teacher Q8_0",
         "llama-server": "llama-server, teacher Q8_0"}
print(f"| server | round | P50 ms (c=1) | P99 ms (c=1) | max req/s with {100*float(target):g}% within {float(budget):g} ms | probes: req/s: % within per run |")
print("|---|---:|---:|---:|---:|---|")
for row in rows:
    name = row.split(" | ")[0][2:]
    print(row.replace(f"| {name} |", f"| {label[name]} |", 1))
med = {k: statistics.median(v) for k, v in best.items()}
l = med["llama-server"]
def ratio(k):
    return f"{med[k] / l:.1f}x" if l > 0 else "not defined (llama-server met the budget at no probed rate)"
print(f"\nMedian over rounds of the highest rate within budget: shrike stage {stage} {med['shrike']:.2f} req/s, "
      f"shrike with the teacher {med['shrike-teacher']:.2f} req/s, llama-server {l:.2f} req/s. "
      f"Stage {stage} / llama-server: {ratio('shrike')}; same model: {ratio('shrike-teacher')}. "
      f"Gamma arrivals, burstiness {burst}.")
PY
