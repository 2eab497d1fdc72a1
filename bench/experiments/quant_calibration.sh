#!/usr/bin/env bash
# The calibration pitfall: an INT4 model calibrated on clean text only, against one calibrated on
# noisy traffic (typos, txt-speak, homophones, mixed script), both scored on noisy test inputs,
# with round-to-nearest (no calibration) as the baseline.
#
#   bench/experiments/quant_calibration.sh -m TEACHER.gguf -o DIR [--types "q4_0 q4_g128"] [--gen GEN_DIR]
#                                [--clean FILE] [--noisy FILE] [--limit N]
#
# The two calibration sets are by default the generator's dev split with --noise 0 and --noise 1:
# the same templates and slot values, clean or every example noisy (none of them test templates);
# --clean / --noisy replace them (e.g. a clean English-only set), --limit caps both (default 256).
# The evaluation is GEN_DIR/test_noisy.jsonl (default runs/gen). Prints how well each set's
# activations cover the evaluation's (`shrike quantize --coverage`), then a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=${SHRIKE:-build/shrike}
types="q4_0 q4_g128"
gen=runs/gen model="" out="" clean="" noisy="" limit=256
while (($#)); do
  case $1 in
    -m) model=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --gen) gen=$2; shift 2 ;;
    --clean) clean=$2; shift 2 ;;
    --noisy) noisy=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    *) echo "quant_calibration.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] && [ -n "$out" ] || { echo "usage: bench/experiments/quant_calibration.sh -m MODEL -o DIR" >&2; exit 2; }
mkdir -p "$out"
for noise in 0 1; do
  [ -f "$out/calib_noise$noise/dev.jsonl" ] || "$shrike" data gen --noise $noise -o "$out/calib_noise$noise" >/dev/null
done
clean=${clean:-$out/calib_noise0/dev.jsonl}
noisy=${noisy:-$out/calib_noise1/dev.jsonl}
eval_set="$gen/test_noisy.jsonl"

for set in "$clean" "$noisy"; do
  "$shrike" quantize "$model" --calib "$set" --calib-limit "$limit" --coverage "$eval_set" | sed 's/^/    /'
  echo
done

row() {  # row TYPE METHOD CALIB FILE
  local json="$out/$1-$2-$3.json"
  "$shrike" eval -m "$4" --ref "$model" --task "$eval_set" --json "$json" >/dev/null
  python3 - "$@" "$json" <<'PY'
import json, sys
t, m, c, f, path = sys.argv[1:6]
j = json.load(open(path)); k = j.get("task_kl", {})
lang = j.get("per_language", {})
en = lang.get("en", {}).get("intent_accuracy", float("nan"))
print(f"| {t} | {m} | {c} | {100*j['intent_accuracy']:.2f}% | {100*en:.2f}% | {100*j['slot_f1']:.2f}% | "
      f"{k.get('kl_mean', float('nan')):.2e} | {k.get('kl_p99', float('nan')):.2e} | {100*k.get('top1_agreement', float('nan')):.2f}% |")
PY
}

echo "| type | method | calibration | noisy intent acc | noisy en intent | noisy slot F1 | mean KL | P99 KL | top-1 |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
row f32 - - "$model"
for t in $types; do
  f="$out/$t-rtn.gguf"
  "$shrike" quantize "$model" -o "$f" --type "$t" >"$out/$t-rtn.log" 2>&1
  row "$t" rtn - "$f"
  for m in awq gptq; do
    for label in clean noisy; do
      set=$([ $label = clean ] && echo "$clean" || echo "$noisy")
      f="$out/$t-$m-$label.gguf"
      "$shrike" quantize "$model" -o "$f" --type "$t" --method $m --calib "$set" \
        --calib-limit "$limit" >"$out/$t-$m-$label.log" 2>&1
      row "$t" "$m" "$label" "$f"
    done
  done
done
