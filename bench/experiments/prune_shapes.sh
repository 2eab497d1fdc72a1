#!/usr/bin/env bash
# Where to spend a 50% pruning budget, measured (issue 27): one intent teacher trained here on the
# built-in zh/en workload, then two students with about half the parameters outside the
# embeddings, each distilled the same way from the same teacher:
#   heads + FFN:                  --heads 0.5 --ffn 0.5
#   depth + width + heads + FFN:  --layers 1 --hidden 0.2 --ffn 0.2 (heads as far as their
#                                 granularity allows: the teacher has 2 KV groups)
# and every model evaluated on the clean and noisy test splits (free-form answers, as `eval`).
#
#   bench/experiments/prune_shapes.sh [OUT_DIR] [N_TRAIN] [TEACHER_EPOCHS] [DISTILL_EPOCHS]
#                           (default runs/prune_shapes, 8000, 4, 2: the demo's teacher)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/runs/prune_shapes}"
n="${2:-8000}"
epochs="${3:-4}"
distill_epochs="${4:-2}"
bin="$root/build/shrike"
[ -x "$bin" ] || { "$root/scripts/setup.sh" && "$root/scripts/build.sh"; }
mkdir -p "$out"
data="$out/data"
step() { echo "== $* ($(date -u +%H:%M:%S))" >&2; }

[ -f "$data/test_noisy.jsonl" ] || "$bin" data gen --n "$n" -o "$data" >/dev/null
if [ ! -f "$out/teacher.gguf" ]; then
  step "teacher (preset small, $epochs epochs on $n examples)"
  "$bin" train --data "$data/train.jsonl" --dev "$data/dev.jsonl" --dev-limit 200 --preset small \
    --epochs "$epochs" --no-progress -o "$out/teacher.gguf"
fi
declare -A shapes=(
  [heads_ffn]="--heads 0.5 --ffn 0.5"
  [depth_width]="--layers 1 --hidden 0.2 --ffn 0.2"
)
for s in heads_ffn depth_width; do
  step "prune $s: ${shapes[$s]}"
  # shellcheck disable=SC2086
  "$bin" prune "$out/teacher.gguf" ${shapes[$s]} --calib "$data/dev.jsonl" -o "$out/$s.pruned.gguf" \
    2>&1 | tee "$out/$s.prune.txt" >&2
  step "distill $s ($distill_epochs epochs)"
  "$bin" distill --teacher "$out/teacher.gguf" --student "$out/$s.pruned.gguf" \
    --data "$data/train.jsonl" --dev "$data/dev.jsonl" --dev-limit 200 --alpha 0.5 --temp 2 \
    --epochs "$distill_epochs" --no-progress -o "$out/$s.gguf"
done

printf '| model | shape | parameters outside the embeddings | test intent | test slot F1 | noisy intent | noisy slot F1 |\n'
printf '|---|---|---:|---:|---:|---:|---:|\n'
for m in teacher heads_ffn depth_width; do
  "$bin" eval -m "$out/$m.gguf" --task "$data/test.jsonl" --json "$out/$m.test.json" >/dev/null
  "$bin" eval -m "$out/$m.gguf" --task "$data/test_noisy.jsonl" --json "$out/$m.noisy.json" >/dev/null
  python3 - "$out" "$m" "$bin" <<'PY'
import json, subprocess, sys
out, m, shrike = sys.argv[1:]
t = json.load(open(f"{out}/{m}.test.json")); n = json.load(open(f"{out}/{m}.noisy.json"))
shape, body = "", ""
if m != "teacher":
    line = open(f"{out}/{m}.prune.txt").read().strip().splitlines()[-1]
    shape = line.split("prune: ")[1].split(";")[0]
    body = line.split("the embeddings ")[1].split(";")[0]
print(f"| {m} | {shape} | {body} | {100 * t['intent_accuracy']:.2f}% | {100 * t['slot_f1']:.2f}% "
      f"| {100 * n['intent_accuracy']:.2f}% | {100 * n['slot_f1']:.2f}% |")
PY
done
