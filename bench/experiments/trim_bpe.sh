#!/usr/bin/env bash
# Vocabulary trimming where it pays (issue 28): a Qwen2-architecture teacher with a real
# byte-level BPE vocabulary of 50,257 tokens (GPT-2's, ../shared/reference/tokenizers) trained here
# on the built-in intent workload, then `trim-vocab` to the tokens its prompts and answers use.
# Checks that the greedy answer to every test utterance is the same before and after, and
# measures the decode step of both models in one interleaved run (medians of `shrike bench`).
#
#   bench/experiments/trim_bpe.sh [OUT_DIR] [N_TRAIN] [EPOCHS]   (default runs/trim_bpe, 8000, 8)
# (A 50k-token embedding learns far more slowly than the 2.9k-token task BPE the demo trains:
# smaller batches and a higher peak rate than train's defaults, and twice the demo's epochs.)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/runs/trim_bpe}"
n="${2:-8000}"
epochs="${3:-8}"
bin="$root/build/shrike"
vocab="$root/../shared/reference/tokenizers/ggml-vocab-gpt-2.gguf"
[ -f "$vocab" ] || { echo "trim_bpe: $vocab is missing (../shared)" >&2; exit 2; }
[ -x "$bin" ] || { "$root/scripts/setup.sh" && "$root/scripts/build.sh"; }
mkdir -p "$out"
data="$out/data"
step() { echo "== $* ($(date -u +%H:%M:%S))" >&2; }

[ -f "$data/test.jsonl" ] || "$bin" data gen --n "$n" -o "$data" >/dev/null
if [ ! -f "$out/teacher.gguf" ]; then
  step "teacher: qwen2, preset small, GPT-2 vocabulary, $epochs epochs on $n examples"
  "$bin" train --arch qwen2 --tokenizer "$vocab" --data "$data/train.jsonl" --dev "$data/dev.jsonl" \
    --dev-limit 100 --preset small --epochs "$epochs" --batch-tokens 1024 --lr 2e-3 --no-progress \
    -o "$out/teacher.gguf"
fi
step "trim-vocab"
"$bin" trim-vocab "$out/teacher.gguf" -o "$out/trimmed.gguf" --keep-from "$data/train.jsonl" \
  --keep-from "$data/dev.jsonl" 2>&1 | tee "$out/trim.txt" >&2

step "greedy answers to every test utterance, both models"
for m in teacher trimmed; do
  "$bin" eval -m "$out/$m.gguf" --task "$data/test.jsonl" --predictions "$out/$m.answers.jsonl" \
    --json "$out/$m.eval.json" >/dev/null
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
a = [json.loads(l) for l in open(f"{out}/teacher.answers.jsonl")]
b = [json.loads(l) for l in open(f"{out}/trimmed.answers.jsonl")]
key = "answer"
same = sum(x[key] == y[key] for x, y in zip(a, b))
print(f"greedy answers: {same} of {len(a)} identical")
for x, y in zip(a, b):
    if x[key] != y[key]:
        print("  differs:", x[key], "|", y[key])
        break
for m in ("teacher", "trimmed"):
    j = json.load(open(f"{out}/{m}.eval.json"))
    print(f"{m}: intent {100 * j['intent_accuracy']:.2f}%, slot F1 {100 * j['slot_f1']:.2f}%")
PY

step "decode step, interleaved (bench: 64 decoded tokens after a 32-token prompt, median of 9)"
for round in 1 2 3; do
  for m in teacher trimmed; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bin" bench -m "$out/$m.gguf" -p 32 -n 64 -r 9 -t 2 \
      --json >"$out/$m.bench.$round.json"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def decode_ms(m):
    vals = []
    for r in (1, 2, 3):
        j = json.load(open(f"{out}/{m}.bench.{r}.json"))
        vals.append(1000.0 / j["decode_tok_s"])
    return statistics.median(vals), vals
t, tv = decode_ms("teacher")
s, sv = decode_ms("trimmed")
print(f"decode step: teacher {t:.3f} ms, trimmed {s:.3f} ms -> {t / s:.2f}x faster "
      f"(medians of 3 interleaved rounds, each a median of 9; teacher {tv}, trimmed {sv})")
PY
