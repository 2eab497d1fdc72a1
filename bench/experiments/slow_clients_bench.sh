#!/usr/bin/env bash
# Slow-client starvation (issue 18, point 4): a well-behaved client's P50/P99 for a 2-token
# completion, alone and while 200 and 2000 connections each hold half a request head open
# (trickling a byte per second, reopened when closed), in alternating rounds of one run.
#   bench/experiments/slow_clients_bench.sh [build/shrike] [stories260K.gguf] [extra bench/slow_clients args]
# e.g. the build of main before the connection front:
#   bench/experiments/slow_clients_bench.sh /work/main/build/shrike
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=${1:-build/shrike}
model=${2:-../shared/reference/stories260K/stories260K.gguf}
shift $(( $# > 2 ? 2 : $# ))
if ! command -v python3 >/dev/null; then
  apt-get update && apt-get install -y python3
fi
[ -x "$shrike" ] || { echo "no shrike binary at $shrike (build it: scripts/build.sh)" >&2; exit 2; }
[ -f "$model" ] || { echo "no model at $model (../shared absent?)" >&2; exit 2; }
# 2000 hostile sockets plus the server's own need more than a 1024 open-file limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec python3 bench/slow_clients/slow_clients.py "$shrike" "$model" --serve-arg=--threads=1 "$@"
