#!/usr/bin/env bash
# The quantisation quality table: every weight type x method for one model, each quantised file
# compared with the full-precision model (KL of the next-token distributions, mean and P99; top-1
# agreement; perplexity) and, for a task model, scored on its task (intent accuracy, slot F1).
#
#   bench/experiments/quant_quality.sh -m MODEL.gguf --calib CALIB (--text EVAL | --task EVAL.jsonl) -o DIR
#       [--types "q8_0 q8_c fp8 q4_0 q4_g128"] [--methods "rtn awq gptq"] [--name LABEL]
#
# Prints one Markdown row per (type, method); quantised files and JSON results stay in DIR.
# A command, not a test: it takes minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=${SHRIKE:-build/shrike}
types="q8_0 q8_c fp8 q4_0 q4_g128"
methods="rtn awq gptq"
model="" calib="" eval_flag="" eval_file="" out="" name=""
while (($#)); do
  case $1 in
    -m) model=$2; shift 2 ;;
    --calib) calib=$2; shift 2 ;;
    --text | --task) eval_flag=$1; eval_file=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --methods) methods=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    *) echo "quant_quality.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] && [ -n "$eval_file" ] && [ -n "$out" ] || {
  echo "usage: bench/experiments/quant_quality.sh -m MODEL --calib F (--text F | --task F) -o DIR" >&2; exit 2; }
name=${name:-$(basename "$model" .gguf)}
mkdir -p "$out"

row() {  # row TYPE METHOD FILE: evaluate FILE and print its Markdown row
  local json="$out/$name-$1-$2.json"
  "$shrike" eval -m "$3" --ref "$model" "$eval_flag" "$eval_file" --json "$json" >/dev/null
  python3 - "$1" "$2" "$3" "$json" <<'PY'
import json, os, sys
t, m, f, path = sys.argv[1:5]
j = json.load(open(path))
kl = j.get("task_kl") or j.get("text") or {}
g = lambda d, k: d.get(k, float("nan"))
task = ""
if "intent_accuracy" in j:
    task = f" {100*j['intent_accuracy']:.2f}% | {100*j['slot_f1']:.2f}% |"
print(f"| {t} | {m} | {os.path.getsize(f)/1e6:.2f} | {g(kl,'kl_mean'):.2e} | "
      f"{g(kl,'kl_p99'):.2e} | {100*g(kl,'top1_agreement'):.2f}% | "
      f"{g(kl,'model_perplexity'):.4f} |{task}")
PY
}

header="| type | method | file MB | mean KL | P99 KL | top-1 | perplexity |"
sep="|---|---|---:|---:|---:|---:|---:|"
if [ "$eval_flag" = "--task" ]; then header+=" intent acc | slot F1 |"; sep+="---:|---:|"; fi
echo "$header"
echo "$sep"
row f32 - "$model"
for t in $types; do
  for m in $methods; do
    f="$out/$name-$t-$m.gguf"
    args=(quantize "$model" -o "$f" --type "$t" --method "$m")
    [ "$m" != rtn ] && args+=(--calib "$calib")
    "$shrike" "${args[@]}" >"$out/$name-$t-$m.log" 2>&1
    row "$t" "$m" "$f"
  done
done
