#!/usr/bin/env bash
# Many streams on one model, a second model and /health beside them (issue 31, acceptance 1).
# One `shrike serve` holds "probe" (stories260K) and "burst" (a random-weight model of the same
# shape written here, `shrike synth`), sharing $THREADS compute threads (default 2) and a KV
# budget; bench/many_streams/many_streams.mjs then keeps $STREAMS (default 2000) streams open on
# "burst" and measures /health and the probe model's P50/P99 idle, loaded and idle again, and the
# server's resident memory per open stream. Prints its JSON; the server log is in $OUT.
#   bench/experiments/many_streams_bench.sh [build/shrike] [stories260K.gguf] [extra node args]
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=${1:-build/shrike}
probe_model=${2:-../shared/reference/stories260K/stories260K.gguf}
shift $(( $# > 2 ? 2 : $# ))
out=${OUT:-/tmp/shrike-many-streams}
streams=${STREAMS:-2000}
mkdir -p "$out"
[ -x "$shrike" ] || { echo "no shrike binary at $shrike (build it: scripts/build.sh)" >&2; exit 2; }
[ -f "$probe_model" ] || { echo "no probe model at $probe_model (../shared absent?)" >&2; exit 2; }
command -v node >/dev/null || { echo "needs node (Node.js 20)" >&2; exit 2; }
# The streams, the probes and the server's own descriptors need more than 1024 open files.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

"$shrike" synth --dim 64 --layers 5 --heads 8 --kv-heads 4 --ffn 172 --context 512 --seed 19 \
  --vocab-from "$probe_model" -o "$out/burst.gguf" >/dev/null

log="$out/serve.log"
"$shrike" serve "probe=$probe_model" "burst=$out/burst.gguf" --port 0 --threads "${THREADS:-2}" \
  --kv-memory "${KV_MB:-256}" --max-seqs "${MAX_SEQS:-64}" --max-queue $((streams * 2)) --ctx 512 \
  --max-connections $((streams + 1000)) >"$log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 300); do
  port=$(grep -o 'listening on http://[^ ]*' "$log" 2>/dev/null | head -1 | sed 's/.*://') || true
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start:" >&2; cat "$log" >&2; exit 1; }
node bench/many_streams/many_streams.mjs "http://127.0.0.1:$port" "$server_pid" \
  --streams "$streams" --seconds "${SECONDS_LOADED:-30}" "$@"
