#!/usr/bin/env bash
# The intent workload end to end, as commands (not tests): the built-in zh/en data, a "base"
# teacher, 50% structured pruning, distillation, a label-only fine-tune; every model evaluated on
# the clean and the noisy test split, and its batch-1 decode speed measured.
#
#   scripts/intent_workload.sh [OUT_DIR] [EPOCHS]      (default runs/intent, 5)
#
# Timings depend on the machine: on 2 cores the teacher trains in ~16 minutes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/runs/intent}"
epochs="${2:-5}"
bin="$root/build/shrike"
[ -x "$bin" ] || { "$root/scripts/setup.sh" && "$root/scripts/build.sh"; }
mkdir -p "$out"
data="$out/data"

step() { echo "== $*" >&2; }
timed() { local t0=$SECONDS; "$@"; echo "   ($((SECONDS - t0)) s)" >&2; }

step "data"
"$bin" data gen -o "$data"
step "teacher (preset base, $epochs epochs)"
timed "$bin" train --data "$data/train.jsonl" --dev "$data/dev.jsonl" --preset base \
    --epochs "$epochs" --no-progress -o "$out/teacher.gguf"
step "prune: half the KV groups (with their query heads), 55% of the FFN channels: -54% of the parameters outside the embeddings"
"$bin" prune "$out/teacher.gguf" --heads 0.5 --ffn 0.55 --calib "$data/dev.jsonl" -o "$out/pruned.gguf"
step "distill"
timed "$bin" distill --teacher "$out/teacher.gguf" --student "$out/pruned.gguf" \
    --data "$data/train.jsonl" --dev "$data/dev.jsonl" --alpha 0.5 --temp 2 --epochs 2 \
    --no-progress -o "$out/distilled.gguf"
step "fine-tune on the labels (alpha 0)"
timed "$bin" distill --teacher "$out/teacher.gguf" --student "$out/distilled.gguf" \
    --data "$data/train.jsonl" --dev "$data/dev.jsonl" --alpha 0 --epochs 1 --lr 2e-4 \
    --no-progress -o "$out/distilled_ft.gguf"

step "evaluate"
printf '| model | parameters | test intent | test slot F1 | noisy intent | noisy slot F1 | decode tok/s (1 thread) |\n'
printf '|---|---:|---:|---:|---:|---:|---:|\n'
for m in teacher pruned distilled distilled_ft; do
  "$bin" eval -m "$out/$m.gguf" --task "$data/test.jsonl" --json "$out/$m.test.json" > "$out/$m.test.txt"
  "$bin" eval -m "$out/$m.gguf" --task "$data/test_noisy.jsonl" --json "$out/$m.noisy.json" > "$out/$m.noisy.txt"
  "$bin" bench -m "$out/$m.gguf" -p 32 -n 64 -t 1 -r 5 --json > "$out/$m.bench.json"
  python3 - "$out" "$m" <<'PY'
import json, sys
out, m = sys.argv[1], sys.argv[2]
t = json.load(open(f"{out}/{m}.test.json")); n = json.load(open(f"{out}/{m}.noisy.json"))
b = json.load(open(f"{out}/{m}.bench.json"))
print(f"| {m} | {b['parameters'] / 1e6:.2f}M | {100 * t['intent_accuracy']:.2f}% | {100 * t['slot_f1']:.2f}% "
      f"| {100 * n['intent_accuracy']:.2f}% | {100 * n['slot_f1']:.2f}% | {b['decode_tok_s']:.0f} |")
PY
done
