#!/usr/bin/env bash
# Side-by-side speed of shrike and llama.cpp (or a fork of it, such as ik_llama.cpp) on the same
# GGUF files and thread counts, the two engines interleaved round by round so both see the same
# machine. Needs a llama.cpp build (never inside this repo):
#   bench/experiments/compare_llamacpp.sh LLAMA_BENCH_BINARY MODEL.gguf... [-- THREADS...]
# Environment:
#   PREFILL="128,512"   prompt lengths for prefill tokens/s
#   REPS=3              repeats inside each engine's run (each engine reports its median/mean)
#   ROUNDS=1            rounds of (shrike, peer) per model and thread count; the table gives the
#                       median over rounds, and the ratios are of those medians
#   PEER_NAME=llama.cpp the peer's name in the table
#   PEER_FLAGS=""       extra llama-bench flags (ik_llama.cpp: "-rtr 1", run-time repacking)
# Each shrike run also probes read bandwidth (`bench --roofline`, a buffer larger than the last
# level cache); decode GB/s is the weights read per token times tokens/s, for both engines, and
# "of read" is that over the median probe of the same rounds.
set -euo pipefail
cd "$(dirname "$0")/../.."
llama_bench=$1
shift
models=()
while (($#)) && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
threads=("${@:-1 2}")
[ ${#threads[@]} -eq 1 ] && read -r -a threads <<<"${threads[0]}"
# OpenBLAS is not used by either engine here, but these variables slow it where it is; its
# threads spinning after start-up would also take the second core from a 2-thread decode.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OPENBLAS_NUM_THREADS=1
reps=${REPS:-3}
rounds=${ROUNDS:-1}
prefill=${PREFILL:-128,512}
peer=${PEER_NAME:-llama.cpp}
read -r -a peer_flags <<<"${PEER_FLAGS:-}"
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
# record ROUND MODEL THREADS ENGINE: stdin's JSON as one line of $raw.
record() {
  python3 -c 'import json, sys; r, m, t, e = sys.argv[1:]
print(json.dumps({"round": int(r), "model": m, "threads": int(t), "engine": e, "out": json.load(sys.stdin)}))' \
    "$@" >>"$raw"
}

for ((round = 1; round <= rounds; round++)); do
  for m in "${models[@]}"; do
    for t in "${threads[@]}"; do
      build/shrike bench -m "$m" -t "$t" -p "$prefill" -n 64 -r "$reps" --roofline --json |
        record "$round" "$m" "$t" shrike
      "$llama_bench" -m "$m" -t "$t" -p "$prefill" -n 64 -r "$reps" -mmp 0 "${peer_flags[@]}" \
        -o json 2>/dev/null | record "$round" "$m" "$t" peer
      echo "round $round: $(basename "$m") t=$t done" >&2
    done
  done
done

python3 - "$raw" "$peer" "$prefill" <<'PY'
import json, os, statistics, sys
raw, peer, prefill = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",") if x != "0"]
runs = [json.loads(line) for line in open(raw)]
med = statistics.median
keys = sorted({(r["model"], r["threads"]) for r in runs}, key=lambda k: (k[0], k[1]))
cols = " | ".join(f"prefill {p} tok/s" for p in prefill)
print(f"| model | threads | engine | {cols} | decode 64 tok/s | decode GB/s | of read | decode vs {peer} |")
print("|---|---|---|" + "---:|" * (len(prefill) + 4))
for m, t in keys:
    mine = [r["out"] for r in runs if (r["model"], r["threads"], r["engine"]) == (m, t, "shrike")]
    theirs = [r["out"] for r in runs if (r["model"], r["threads"], r["engine"]) == (m, t, "peer")]
    weight_bytes = mine[0]["decode_weight_bytes"]
    bw = med([j["bandwidth_gb_s"] for j in mine])
    s_pp = {p: med([{x["tokens"]: x["tok_s"] for x in j["prefill"]}[p] for j in mine]) for p in prefill}
    s_tg = med([j["decode_tok_s"] for j in mine])
    p_pp = {p: med([[r["avg_ts"] for r in rows if r["n_gen"] == 0 and r["n_prompt"] == p][0]
                    for rows in theirs]) for p in prefill}
    p_tg = med([[r["avg_ts"] for r in rows if r["n_prompt"] == 0][0] for rows in theirs])
    name = os.path.basename(m)
    for engine, pp, tg, ratio in (("shrike", s_pp, s_tg, f"**{s_tg / p_tg:.2f}x**"), (peer, p_pp, p_tg, "")):
        gb = tg * weight_bytes / 1e9
        cells = " | ".join(f"{pp[p]:.1f}" for p in prefill)
        print(f"| {name} | {t} | {engine} | {cells} | {tg:.2f} | {gb:.1f} | {100 * gb / bw:.0f}% | {ratio} |")
print()
print(f"read bandwidth probe (median over rounds, per model row): "
      + ", ".join(f"{os.path.basename(m)} t={t}: "
                  f"{med([r['out']['bandwidth_gb_s'] for r in runs if (r['model'], r['threads'], r['engine']) == (m, t, 'shrike')]):.1f} GB/s"
                  for m, t in keys))
PY
