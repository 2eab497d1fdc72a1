#!/usr/bin/env bash
# The KV-cache pitfall: a model trained on the long-context recall task (`shrike data gen --task
# recall`, then `shrike train`) answers with its KV cache in f16, int8 and int8-mixed at growing
# distances between the stated code and the question. For each: exact recall, per-character
# recall of the code, KL of the answer tokens against the same model with an f32 cache (mean,
# P99), top-1 agreement, and the cache's bytes per token after decoding 500 positions.
#
#   bench/experiments/kv_recall.sh MODEL.gguf DATA_DIR OUT_DIR [TYPES]
#
# DATA_DIR holds test_d<D>.jsonl files; TYPES defaults to "f32 f16 int8 int8-mixed". Prints a
# Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=${SHRIKE:-build/shrike}
model=$1 data=$2 out=$3
types=${4:-f32 f16 int8 int8-mixed}
mkdir -p "$out"
echo "| distance (words) | KV cache | bytes/token | exact recall | code characters right | mean KL | P99 KL | top-1 |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for f in $(ls "$data"/test_d*.jsonl | sort -V); do
  d=$(basename "$f" .jsonl)
  d=${d#test_d}
  for t in $types; do
    tag="$out/d$d-$t"
    "$shrike" eval -m "$model" --ref "$model" --task "$f" --kv-type "$t" --json "$tag.json" \
      --predictions "$tag.pred.jsonl" >/dev/null
    "$shrike" bench -m "$model" --kv-type "$t" -p 16 -n 500 -r 1 -t 1 --json >"$tag.bench.json"
    python3 - "$d" "$t" "$tag" <<'PY'
import json, sys
d, t, tag = sys.argv[1:4]
j = json.load(open(tag + ".json")); k = j.get("task_kl", {})
b = json.load(open(tag + ".bench.json"))
right = total = exact = n = 0
for line in open(tag + ".pred.jsonl"):
    p = json.loads(line)
    gold = json.loads(p["gold"])["slots"].get("code", "")
    try:
        got = json.loads(p["answer"]).get("slots", {}).get("code", "")
    except Exception:
        got = ""
    n += 1; exact += got == gold
    total += len(gold); right += sum(a == b for a, b in zip(gold, got))
print(f"| {d} | {t} | {b.get('kv_bytes_per_token', float('nan')):.0f} | {100*exact/n:.1f}% | {100*right/total:.1f}% | "
      f"{k.get('kl_mean', float('nan')):.2e} | {k.get('kl_p99', float('nan')):.2e} | {100*k.get('top1_agreement', float('nan')):.2f}% |")
PY
  done
done
