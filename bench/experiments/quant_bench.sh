#!/usr/bin/env bash
# Decode speed per weight type on a ~0.5B model (Qwen2-0.5B's shape as a random-weight llama:
# dim 896, 24 layers, 14 heads / 2 KV heads, FFN 4864, vocabulary 151936, tied embedding), with
# the read-bandwidth roofline, and llama.cpp on the same files for the types it shares.
#
#   bench/experiments/quant_bench.sh DIR [LLAMA_BENCH] [THREADS]
#
# Writes the F16 model and its quantised copies into DIR (about 2.5 GB), then runs every type
# interleaved for ROUNDS rounds (default 3) and prints one Markdown row per type: the median
# decode tokens/s over the rounds, its ratio to F16 in the same rounds, the weight bytes a step
# reads, GB/s, and the fraction of the measured read bandwidth.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$1
llama_bench=${2:-}
threads=${3:-1}
rounds=${ROUNDS:-3}
shrike=${SHRIKE:-build/shrike}
types="f16 q8_0 q8_c fp8 q4_0 q4_g128"
# OpenBLAS is not on the decode path, but these variables slow it where it is.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
mkdir -p "$dir"
[ -f "$dir/m-f16.gguf" ] || "$shrike" synth --dim 896 --layers 24 --heads 14 --kv-heads 2 \
  --ffn 4864 --vocab 151936 --context 4096 --tied --type f16 -o "$dir/m-f16.gguf"
for t in $types; do
  [ "$t" = f16 ] || [ -f "$dir/m-$t.gguf" ] ||
    "$shrike" quantize "$dir/m-f16.gguf" -o "$dir/m-$t.gguf" --type "$t" >/dev/null 2>&1
done
for r in $(seq "$rounds"); do
  for t in $types; do
    "$shrike" bench -m "$dir/m-$t.gguf" -t "$threads" -p 16 -n 64 -r 3 --roofline --json \
      >"$dir/bench-$t-$r.json"
    if [ -n "$llama_bench" ] && [[ " f16 q8_0 q4_0 " == *" $t "* ]]; then
      "$llama_bench" -m "$dir/m-$t.gguf" -t "$threads" -p 0 -n 64 -r 3 -mmp 0 -o json \
        2>/dev/null >"$dir/llama-$t-$r.json"
    fi
  done
done
python3 - "$dir" "$rounds" "$types" <<'PY'
import json, statistics, sys
d, rounds, types = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def load(p):
    try: return json.load(open(p))
    except Exception: return None
print("| type | shrike decode tok/s | vs f16 | weights read/step MB | GB/s | of read bandwidth | llama.cpp decode tok/s | llama.cpp vs f16 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
sh = {t: [load(f"{d}/bench-{t}-{r}.json") for r in range(1, rounds + 1)] for t in types}
ll = {t: [load(f"{d}/llama-{t}-{r}.json") for r in range(1, rounds + 1)] for t in types}
def llama_tg(rows): return [x["avg_ts"] for x in rows if x["n_gen"] > 0][0]
for t in types:
    tok = [j["decode_tok_s"] for j in sh[t]]
    ratio = statistics.median(j["decode_tok_s"] / f["decode_tok_s"] for j, f in zip(sh[t], sh["f16"]))
    j = sh[t][0]
    gbs = statistics.median(x["decode_gb_s"] for x in sh[t])
    frac = statistics.median(x["roofline_fraction"] for x in sh[t])
    lc = lr = ""
    if all(ll[t]) and all(ll["f16"]):
        lt = [llama_tg(x) for x in ll[t]]
        lc = f"{statistics.median(lt):.1f}"
        lr = f"{statistics.median(llama_tg(a) / llama_tg(b) for a, b in zip(ll[t], ll['f16'])):.2f}x"
    print(f"| {t} | {statistics.median(tok):.1f} | {ratio:.2f}x | {j['decode_weight_bytes']/1e6:.0f} | "
          f"{gbs:.1f} | {100*frac:.0f}% | {lc} | {lr} |")
PY
