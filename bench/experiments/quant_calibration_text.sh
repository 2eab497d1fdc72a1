#!/usr/bin/env bash
# The calibration pitfall on free text: a model quantised to INT4 with calibration on clean text
# and with calibration on noisy text (typos, txt-speak, dropped punctuation, shouting), each scored
# on clean and on noisy held-out text by KL against the full-precision model. A calibration set
# fits the inputs it saw; the table shows which set wins on which traffic.
#
#   bench/experiments/quant_calibration_text.sh -m MODEL.gguf --calib CLEAN.jsonl --eval CLEAN_EVAL.jsonl -o DIR
#                                     [--types "q4_0 q4_g128"] [--methods "awq gptq"]
#
# CLEAN.jsonl / CLEAN_EVAL.jsonl: {"text": ...} documents (different ones). Their noisy copies are
# written to DIR by a seeded noise function below (different seeds for calibration and eval).
# Prints both sets' coverage of the noisy eval text (`shrike quantize --coverage`), then a
# Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=${SHRIKE:-build/shrike}
types="q4_0 q4_g128" methods="awq gptq"
model="" calib="" eval_clean="" out=""
while (($#)); do
  case $1 in
    -m) model=$2; shift 2 ;;
    --calib) calib=$2; shift 2 ;;
    --eval) eval_clean=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --methods) methods=$2; shift 2 ;;
    *) echo "quant_calibration_text.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] && [ -n "$calib" ] && [ -n "$eval_clean" ] && [ -n "$out" ] || {
  echo "usage: bench/experiments/quant_calibration_text.sh -m MODEL --calib CLEAN.jsonl --eval CLEAN_EVAL.jsonl -o DIR" >&2
  exit 2
}
mkdir -p "$out"

noisify() {  # noisify SRC DST SEED
  python3 - "$@" <<'PY'
import json, random, sys
src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
slang = {"you": "u", "are": "r", "to": "2", "for": "4", "please": "plz", "because": "cuz",
         "and": "n", "the": "da", "with": "w/", "people": "ppl", "really": "rly", "okay": "k",
         "very": "v", "said": "sed", "was": "wuz", "what": "wat"}
def typo(w):
    if len(w) < 3: return w
    i = rng.randrange(len(w) - 1); k = rng.random()
    if k < 0.3: return w[:i] + w[i + 1] + w[i] + w[i + 2:]                 # swapped letters
    if k < 0.55: return w[:i] + w[i + 1:]                                   # dropped letter
    if k < 0.8: return w[:i] + w[i] + w[i:]                                 # doubled letter
    return w[:i] + rng.choice("qwertyuiopasdfghjklzxcvbnm") + w[i + 1:]     # wrong key
def noisy(text):
    words = []
    for w in text.split():
        core = w.strip(".,!?\"'"); low = core.lower()
        if low in slang and rng.random() < 0.7: w = w.replace(core, slang[low])
        elif rng.random() < 0.15: w = w.replace(core, typo(core))
        if rng.random() < 0.5: w = w.replace(",", "").replace(".", "")
        words.append(w)
    s = " ".join(words)
    if rng.random() < 0.3: s = s.lower()
    if rng.random() < 0.15: s = s.upper()
    return s.replace("!", "!!!")
with open(src) as f, open(dst, "w") as g:
    for n, line in enumerate(f, 1):
        if not line.strip(): continue
        try: d = json.loads(line); d["text"] = noisy(d["text"])
        except (ValueError, KeyError, TypeError): sys.exit(f"{src}:{n}: not a JSON object with a \"text\" string")
        g.write(json.dumps(d) + "\n")
PY
}
noisify "$calib" "$out/calib_noisy.jsonl" 1
noisify "$eval_clean" "$out/eval_noisy.jsonl" 2
eval_noisy="$out/eval_noisy.jsonl"

for set in "$calib" "$out/calib_noisy.jsonl"; do
  "$shrike" quantize "$model" --calib "$set" --coverage "$eval_noisy" | sed 's/^/    /'
  echo
done

score() {  # score MODEL TEXT JSON -> "mean KL | P99 KL | top-1 | perplexity"
  "$shrike" eval -m "$1" --ref "$model" --text "$2" --json "$3" >/dev/null
  python3 - "$3" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["text"]
print(f"{t['kl_mean']:.4f} | {t['kl_p99']:.3f} | {100 * t['top1_agreement']:.2f}% | {t['model_perplexity']:.2f}")
PY
}

echo "| type | method | calibration | clean text: mean KL | P99 KL | top-1 | ppl | noisy text: mean KL | P99 KL | top-1 | ppl |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
row() {  # row TYPE METHOD LABEL FILE
  echo "| $1 | $2 | $3 | $(score "$4" "$eval_clean" "$4.clean.json") | $(score "$4" "$eval_noisy" "$4.noisy.json") |"
}
row f32 - - "$model"
for t in $types; do
  f="$out/$t-rtn.gguf"
  "$shrike" quantize "$model" -o "$f" --type "$t" >"$f.log" 2>&1
  row "$t" rtn - "$f"
  for m in $methods; do
    for label in clean noisy; do
      set=$([ $label = clean ] && echo "$calib" || echo "$out/calib_noisy.jsonl")
      f="$out/$t-$m-$label.gguf"
      "$shrike" quantize "$model" -o "$f" --type "$t" --method "$m" --calib "$set" >"$f.log" 2>&1
      row "$t" "$m" "$label" "$f"
    done
  done
done
