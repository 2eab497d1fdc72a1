#!/usr/bin/env bash
# The serving benchmark of docs/serving.md, one command:
#   bench/experiments/bench_serving.sh MODEL.gguf [LLAMA_SERVER_BINARY]
# Workload A (shrike alone): 128 requests, prompts of 64-512 tokens and 16-128 output tokens
# (seeded), at concurrency 1, 8 and 32, continuous batching versus static batching (batch 8 and
# 32). Workload B (side by side with llama-server when its binary is given, -t 2 -np 8, no mmap):
# 64 requests of a ~33-token prompt and 32 output tokens (ignore_eos) at concurrency 1 and 8.
# Both servers get 2 threads. Prints one Markdown row per run; JSON reports go to $OUT
# (default /tmp/shrike-bench-serving). Needs python3 (prompt generation and the table).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=$1
llama_server=${2:-}
out=${OUT:-/tmp/shrike-bench-serving}
threads=${THREADS:-2}
mkdir -p "$out"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

# Workload A's prompts: common English words, about one token each in Llama-2-style vocabularies
# (the report counts the server's own usage figures).
python3 - "$out/prompts_a.jsonl" <<'PY'
import json, random, sys
words = ("the of and to in is you that it he was for on are as with his they at be this have from "
         "or one had by word but not what all were we when your can said there use an each which "
         "she do how their if will up other about out many then them these so some her would make "
         "like him into time has look two more write go see number no way could people my than "
         "first water been call who oil its now find long down day did get come made may part").split()
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for _ in range(128):
        n = rng.randint(64, 512)
        f.write(json.dumps({"prompt": " ".join(rng.choice(words) for _ in range(n)),
                            "max_tokens": rng.randint(16, 128)}) + "\n")
PY

port_of() {  # waits for the server's "listening on http://host:port" line in $1
  for _ in $(seq 1 600); do
    p=$(grep -o 'listening on http://[^ ]*' "$1" 2>/dev/null | head -1 | sed 's/.*://')
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.1
  done
  echo "server did not start; its log:" >&2; cat "$1" >&2; return 1
}

server_pid=""
# (llama-server c392e509 aborts while exiting on SIGTERM: its exit status is not ours to check.)
stop_server() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=""
}
trap stop_server EXIT

row() {  # label concurrency json
  python3 - "$@" <<'PY'
import json, sys
label, conc, path = sys.argv[1:4]
s = json.load(open(path))["summary"]
print(f"| {label} | {conc} | {s['completed']}/{s['sent']} | {s['requests_per_s']:.2f} | "
      f"{s['output_tokens_per_s']:.0f} | {s['e2e']['p50_ms']:.0f} | {s['e2e']['p99_ms']:.0f} | "
      f"{s['ttft']['p50_ms']:.0f} | {s['ttft']['p99_ms']:.0f} |")
PY
}

echo "| server | concurrency | completed | req/s | output tok/s | E2E P50 ms | E2E P99 ms | TTFT P50 ms | TTFT P99 ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"

run_shrike() {  # label loadtest-args... -- serve-args...
  local label=$1; shift
  local lt=() sv=()
  while [ "$1" != "--" ]; do lt+=("$1"); shift; done; shift
  sv=("$@")
  # A fresh server per run: the same prompts are sent at each concurrency, and a warm prefix
  # cache would turn the later runs into cache hits.
  for c in ${CONCURRENCY:-1 8 32}; do
    build/shrike serve "$model" --port 0 --threads "$threads" "${sv[@]}" 2>"$out/server.log" &
    server_pid=$!
    local port; port=$(port_of "$out/server.log")
    local j="$out/${label// /_}_c$c.json"
    build/shrike loadtest --url "http://127.0.0.1:$port" "${lt[@]}" --concurrency "$c" \
      --timeout 600 --out-json "$j" >/dev/null
    row "$label" "$c" "$j"
    stop_server
  done
}

A=(--prompts "$out/prompts_a.jsonl" --max-requests 128)
run_shrike "A shrike continuous" "${A[@]}" --
run_shrike "A shrike static 8" "${A[@]}" -- --batching static --batch-size 8 --batch-wait-ms 50
run_shrike "A shrike static 32" "${A[@]}" -- --batching static --batch-size 32 --batch-wait-ms 50

B=(--input-tokens 33 --output-tokens 32 --max-requests 64)
CONCURRENCY="1 8" run_shrike "B shrike continuous" "${B[@]}" --
if [ -n "$llama_server" ]; then
  for c in 1 8; do
    "$llama_server" -m "$model" -t "$threads" -np 8 --no-mmap --port 18093 -c 4096 >"$out/llama.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 600); do curl -sf http://127.0.0.1:18093/health >/dev/null && break; sleep 0.2; done
    j="$out/B_llama-server_c$c.json"
    build/shrike loadtest --url http://127.0.0.1:18093 "${B[@]}" --concurrency "$c" --timeout 600 \
      --out-json "$j" >/dev/null
    row "B llama-server -np 8" "$c" "$j"
    stop_server
  done
fi
