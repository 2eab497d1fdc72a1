#!/usr/bin/env bash
# Side-by-side speed of shrike and llama.cpp on the same GGUF files and thread counts, runs
# interleaved so both see the same machine. Needs a llama.cpp build (never inside this repo):
#   scripts/compare_llamacpp.sh LLAMA_BENCH_BINARY MODEL.gguf... [-- THREADS...]
# Prints one Markdown row per (model, threads, engine): prefill 128/512 and decode tokens/s, the
# median of each engine's repeats, and shrike's measured read bandwidth for the roofline.
set -euo pipefail
cd "$(dirname "$0")/.."
llama_bench=$1
shift
models=()
while (($#)) && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
threads=("${@:-1 2}")
[ ${#threads[@]} -eq 1 ] && read -r -a threads <<<"${threads[0]}"
# OpenBLAS is not used by either engine here, but these variables slow it where it is.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
reps=${REPS:-3}

echo "| model | threads | engine | prefill 128 tok/s | prefill 512 tok/s | decode 64 tok/s | decode GB/s | read GB/s | of read |"
echo "|---|---|---|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  for t in "${threads[@]}"; do
    j=$(build/shrike bench -m "$m" -t "$t" -p 128,512 -n 64 -r "$reps" --roofline --json)
    python3 - "$m" "$t" "$j" <<'PY'
import json, os, sys
m, t, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
p = {x["tokens"]: x["tok_s"] for x in j["prefill"]}
print(f"| {os.path.basename(m)} | {t} | shrike | {p[128]:.0f} | {p[512]:.0f} | {j['decode_tok_s']:.1f} | "
      f"{j['decode_gb_s']:.1f} | {j['bandwidth_gb_s']:.1f} | {100*j['roofline_fraction']:.0f}% |")
PY
    o=$("$llama_bench" -m "$m" -t "$t" -p 128,512 -n 64 -r "$reps" -mmp 0 -o json 2>/dev/null)
    python3 - "$m" "$t" "$o" "$j" <<'PY'
import json, os, sys
m, t, rows, mine = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
pp = {r["n_prompt"]: r["avg_ts"] for r in rows if r["n_gen"] == 0}
tg = [r["avg_ts"] for r in rows if r["n_prompt"] == 0][0]
gb = tg * mine["decode_weight_bytes"] / 1e9
print(f"| {os.path.basename(m)} | {t} | llama.cpp | {pp[128]:.0f} | {pp[512]:.0f} | {tg:.1f} | {gb:.1f} | | "
      f"{100*gb/mine['bandwidth_gb_s']:.0f}% |")
PY
  done
done
