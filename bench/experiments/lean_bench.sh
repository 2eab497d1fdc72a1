#!/usr/bin/env bash
# The lean path (issue 15), as a command: batch-1 decode step time of two shrike builds, A (before)
# and B (after), interleaved round by round on the same models and thread count, then B's
# per-operation breakdown of the step (`shrike bench --ops`).
#
#   bench/experiments/lean_bench.sh A_SHRIKE B_SHRIKE MODEL... (ROUNDS=7, THREADS=2, TOKENS=64)
#
# A model named synth-110M-q8_0 that does not exist is written first (random weights, the 110M
# shape of bench/experiments/bench_roofline.sh). Prints a Markdown table: median step time of A and B and
# A/B per model, each from ROUNDS alternating runs of `shrike bench` (3 repeats each, median).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 A_SHRIKE B_SHRIKE MODEL..." >&2; exit 2; }
a="$1" b="$2"
shift 2
rounds="${ROUNDS:-7}" threads="${THREADS:-2}" tokens="${TOKENS:-64}"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
# shrike links OpenBLAS (training), whose threads spin for a while after start-up and take the
# second core from a 2-thread decode run that starts at once; nothing here uses BLAS.
export OPENBLAS_NUM_THREADS=1
for m in "$@"; do
  if [ ! -f "$m" ] && [ "$(basename "$m")" = synth-110M-q8_0.gguf ]; then
    "$b" synth --dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 --type q8_0 --tied \
      -o "$m" >/dev/null
  fi
  [ -f "$m" ] || { echo "$0: no model file $m" >&2; exit 2; }
done

step_us() {  # binary model -> median batch-1 decode step in microseconds
  # The JSON is parsed after the run, not through a pipe: a parser starting up beside the run takes
  # the second core while it decodes.
  local json
  json=$("$1" bench -m "$2" -p 1 -n "$tokens" -r 3 -t "$threads" --json)
  python3 -c 'import json,sys; print(1e6 / json.loads(sys.argv[1])["decode_tok_s"])' "$json"
}

echo "| model | A step (us) | B step (us) | A/B | rounds |"
echo "|---|---:|---:|---:|---:|"
for m in "$@"; do
  as=() bs=()
  for ((r = 0; r < rounds; ++r)); do
    as+=("$(step_us "$a" "$m")")
    bs+=("$(step_us "$b" "$m")")
  done
  python3 - "$(basename "$m")" "$rounds" "${as[*]}" "${bs[*]}" <<'PY'
import statistics, sys
name, rounds, a, b = sys.argv[1], sys.argv[2], list(map(float, sys.argv[3].split())), list(map(float, sys.argv[4].split()))
ma, mb = statistics.median(a), statistics.median(b)
print(f"| {name} | {ma:.1f} | {mb:.1f} | {ma / mb:.2f}x | {rounds} |")
PY
done
echo
for m in "$@"; do
  echo "B, $(basename "$m"), threads $threads:"
  "$b" bench -m "$m" -p 1 -n "$tokens" -r 5 -t "$threads" --ops | sed -n '/by operation/,$p'
done
