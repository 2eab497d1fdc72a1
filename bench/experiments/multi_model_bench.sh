#!/usr/bin/env bash
# Two models in one `shrike serve`: does a burst on one leave the other's latency alone? (issue 19,
# acceptance 1). One server holds "probe" (stories260K) and "burst" (a random-weight model of
# the same shape written here, `shrike synth`), sharing the compute threads ($THREADS, default 1)
# and a 64 MiB KV budget.
# The probe model gets a closed loop of 1 request at a time (200 requests, ~32-word prompts, 64
# output tokens), alone ("unloaded") and while 64 concurrent requests (~100-word prompts, 128
# output tokens) stream from the burst model ("burst"), alternating three times in one run. Prints
# the probe's e2e and TTFT P50/P99 per round, the medians per condition and their ratio.
#   bench/experiments/multi_model_bench.sh [build/shrike] [stories260K.gguf]
# Needs python3; the JSON reports go to $OUT (default /tmp/shrike-multi-model-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=${1:-build/shrike}
probe_model=${2:-../shared/reference/stories260K/stories260K.gguf}
out=${OUT:-/tmp/shrike-multi-model-bench}
rounds=${ROUNDS:-3}
# One compute thread by default: on a small shared machine a second thread's spin-waits cost
# more than they save (every kernel waits for the slower thread).
threads=${THREADS:-1}
mkdir -p "$out"
[ -x "$shrike" ] || { echo "no shrike binary at $shrike (build it: scripts/build.sh)" >&2; exit 2; }
[ -f "$probe_model" ] || { echo "no probe model at $probe_model (../shared absent?)" >&2; exit 2; }

"$shrike" synth --dim 64 --layers 5 --heads 8 --kv-heads 4 --ffn 172 --context 512 --seed 19 \
  --vocab-from "$probe_model" -o "$out/burst.gguf" >/dev/null

log="$out/serve.log"
"$shrike" serve "probe=$probe_model" "burst=$out/burst.gguf" --port 0 --threads "$threads" \
  --kv-memory 64 --max-seqs 64 --max-queue 256 --ctx 512 --http-threads "${HTTP_THREADS:-0}" \
  >"$log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 300); do
  port=$(grep -o 'listening on http://[^ ]*' "$log" 2>/dev/null | head -1 | sed 's/.*://') || true
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start:" >&2; cat "$log" >&2; exit 1; }
url="http://127.0.0.1:$port"

probe() {  # round condition
  "$shrike" loadtest --url "$url" --model probe --concurrency 1 --max-requests 200 \
    --input-tokens 32 --output-tokens 64 --seed 1 --out-json "$out/probe_$1_$2.json" >/dev/null
}

burst_tokens() {  # the burst model's generated tokens so far
  curl -s --max-time 5 "$url/metrics" | grep '^shrike_generation_tokens_total{model="burst"}' | awk '{print $2}' || echo 0
}

for r in $(seq 1 "$rounds"); do
  probe "$r" unloaded
  # The burst runs until the probe is done (then it is killed: its report is not needed, the
  # server cancels the requests whose client went away).
  "$shrike" loadtest --url "$url" --model burst --concurrency 64 --duration 600 \
    --max-requests 20000 --input-tokens 100 --output-tokens 128 --seed "$r" >/dev/null 2>&1 &
  burst_pid=$!
  # Until the burst's requests are running (at least 16 of them; 20 s at most).
  for _ in $(seq 1 200); do
    running=$(curl -s --max-time 2 "$url/metrics" | grep '^shrike_requests_running{model="burst"}' | awk '{print $2}' || true)
    [ "${running:-0}" -ge 16 ] && break
    sleep 0.1
  done
  t0=$(date +%s.%N)
  n0=$(burst_tokens)
  probe "$r" burst
  n1=$(burst_tokens)
  t1=$(date +%s.%N)
  kill -TERM "$burst_pid" 2>/dev/null || true
  wait "$burst_pid" 2>/dev/null || true
  python3 -c "print(($n1 - $n0) / ($t1 - $t0))" >"$out/burst_rate_$r.txt"
  if [ "$(python3 -c "print(int($n1 - $n0 > 0))")" != 1 ]; then
    echo "round $r: the burst model generated nothing during the probe" >&2
    exit 1
  fi
  sleep 1
done

python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys, os
out, rounds = sys.argv[1], int(sys.argv[2])
def s(cond, r):
    return json.load(open(os.path.join(out, f"probe_{r}_{cond}.json")))["summary"]
print("| round | condition | probe completed | e2e P50 ms | e2e P99 ms | TTFT P50 ms | TTFT P99 ms |")
print("|---|---|---|---|---|---|---|")
p99 = {"unloaded": [], "burst": []}
ttft99 = {"unloaded": [], "burst": []}
for r in range(1, rounds + 1):
    for cond in ("unloaded", "burst"):
        x = s(cond, r)
        if x["completed"] != x["sent"]:
            sys.exit(f"round {r} {cond}: {x['sent'] - x['completed']} probe requests failed")
        p99[cond].append(x["e2e"]["p99_ms"]); ttft99[cond].append(x["ttft"]["p99_ms"])
        print(f"| {r} | {cond} | {x['completed']}/{x['sent']} | {x['e2e']['p50_ms']:.1f} | "
              f"{x['e2e']['p99_ms']:.1f} | {x['ttft']['p50_ms']:.1f} | {x['ttft']['p99_ms']:.1f} |")
mu, mb = statistics.median(p99["unloaded"]), statistics.median(p99["burst"])
tu, tb = statistics.median(ttft99["unloaded"]), statistics.median(ttft99["burst"])
for r in range(1, rounds + 1):
    rate = float(open(os.path.join(out, f"burst_rate_{r}.txt")).read())
    print(f"burst round {r}: the burst model generated {rate:.0f} tokens/s while the probe ran")
print(f"\nprobe e2e P99, median of {rounds}: unloaded {mu:.1f} ms, during the burst {mb:.1f} ms, "
      f"ratio {mb / mu:.2f}x (acceptance: within 2x)")
print(f"probe TTFT P99, median of {rounds}: unloaded {tu:.1f} ms, during the burst {tb:.1f} ms, "
      f"ratio {tb / tu:.2f}x")
PY
