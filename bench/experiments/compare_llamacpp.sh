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
#   PEER2=""            a second peer's llama-bench, run in the same rounds (PEER2_NAME,
#                       PEER2_FLAGS as above); the ratios are then against the faster peer
#   SHRIKE_FLAGS=""     extra `shrike bench` flags (e.g. --bf16-dot, the counterpart of -rtr)
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
peer2_bench=${PEER2:-}
peer2=${PEER2_NAME:-peer2}
read -r -a peer2_flags <<<"${PEER2_FLAGS:-}"
read -r -a shrike_flags <<<"${SHRIKE_FLAGS:-}"
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
      build/shrike bench -m "$m" -t "$t" -p "$prefill" -n 64 -r "$reps" --roofline --json \
        "${shrike_flags[@]}" |
        record "$round" "$m" "$t" shrike
      "$llama_bench" -m "$m" -t "$t" -p "$prefill" -n 64 -r "$reps" -mmp 0 "${peer_flags[@]}" \
        -o json 2>/dev/null | record "$round" "$m" "$t" peer
      if [ -n "$peer2_bench" ]; then
        "$peer2_bench" -m "$m" -t "$t" -p "$prefill" -n 64 -r "$reps" -mmp 0 "${peer2_flags[@]}" \
          -o json 2>/dev/null | record "$round" "$m" "$t" peer2
      fi
      echo "round $round: $(basename "$m") t=$t done" >&2
    done
  done
done

python3 - "$raw" "$peer" "$prefill" "$peer2" <<'PY'
import json, os, statistics, sys
raw, peer, prefill = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",") if x != "0"]
names = {"peer": peer, "peer2": sys.argv[4]}
runs = [json.loads(line) for line in open(raw)]
med = statistics.median
keys = sorted({(r["model"], r["threads"]) for r in runs}, key=lambda k: (k[0], k[1]))
cols = " | ".join(f"prefill {p} tok/s" for p in prefill)
engines = [e for e in ("peer", "peer2") if any(r["engine"] == e for r in runs)]
vs = names[engines[0]] if len(engines) == 1 else "the faster peer"
last = prefill[-1] if prefill else None
pcol = f" prefill {last} vs {vs} |" if last else ""
print(f"| model | threads | engine | {cols} | decode 64 tok/s | decode GB/s | of read | decode vs {vs} |{pcol}")
print("|---|---|---|" + "---:|" * (len(prefill) + 4 + (1 if last else 0)))
for m, t in keys:
    def outs(e):
        return [r["out"] for r in runs if (r["model"], r["threads"], r["engine"]) == (m, t, e)]
    mine = outs("shrike")
    weight_bytes = mine[0]["decode_weight_bytes"]
    bw = med([j["bandwidth_gb_s"] for j in mine])
    rows = [("shrike", {p: med([{x["tokens"]: x["tok_s"] for x in j["prefill"]}[p] for j in mine]) for p in prefill},
             med([j["decode_tok_s"] for j in mine]))]
    for e in engines:
        theirs = outs(e)
        p_pp = {p: med([[r["avg_ts"] for r in rs if r["n_gen"] == 0 and r["n_prompt"] == p][0]
                        for rs in theirs]) for p in prefill}
        p_tg = med([[r["avg_ts"] for r in rs if r["n_prompt"] == 0][0] for rs in theirs])
        rows.append((names[e], p_pp, p_tg))
    best_tg = max(r[2] for r in rows[1:])
    best_pp = max(r[1][last] for r in rows[1:]) if last else None
    name = os.path.basename(m)
    for i, (engine, pp, tg) in enumerate(rows):
        gb = tg * weight_bytes / 1e9
        cells = " | ".join(f"{pp[p]:.1f}" for p in prefill)
        ratio = f"**{tg / best_tg:.2f}x**" if i == 0 else ""
        pratio = (f" **{pp[last] / best_pp:.2f}x** |" if i == 0 else " |") if last else ""
        print(f"| {name} | {t} | {engine} | {cells} | {tg:.2f} | {gb:.1f} | {100 * gb / bw:.0f}% | {ratio} |{pratio}")
print()
print(f"read bandwidth probe (median over rounds, per model row): "
      + ", ".join(f"{os.path.basename(m)} t={t}: "
                  f"{med([r['out']['bandwidth_gb_s'] for r in runs if (r['model'], r['threads'], r['engine']) == (m, t, 'shrike')]):.1f} GB/s"
                  for m, t in keys))
PY
