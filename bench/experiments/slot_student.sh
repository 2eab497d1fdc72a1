#!/usr/bin/env bash
# The student of a teacher that slot_recipe.sh trained: half its KV groups (with their query heads)
# and half its FFN channels pruned (calibrated on 200 training examples), then distilled from the
# teacher on the same training data, scored free-form on the same eval split (issue 32).
# Extra arguments go to `shrike distill`.
#
#   bench/experiments/slot_student.sh OUT_DIR [distill args...]
#   e.g. bench/experiments/slot_student.sh runs/slots/p1 --epochs 4 --batch-tokens 1024
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: slot_student.sh OUT_DIR [distill args...]}"
shift
bin="$root/build/shrike"
for f in model.gguf train.jsonl eval.jsonl; do
  [ -f "$out/$f" ] || { echo "slot_student.sh: $out/$f is missing (run slot_recipe.sh first)" >&2; exit 1; }
done
start=$SECONDS
"$bin" prune "$out/model.gguf" --heads 0.5 --ffn 0.5 --calib "$out/train.jsonl" --calib-limit 200 \
  -o "$out/pruned.gguf"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bin" distill --teacher "$out/model.gguf" \
  --student "$out/pruned.gguf" --data "$out/train.jsonl" --alpha 0.5 --temp 2 --no-progress \
  -o "$out/student.gguf" "$@"
echo "pruning + distillation: $((SECONDS - start)) s"
echo "== student, free-form"
"$bin" eval -m "$out/student.gguf" --task "$out/eval.jsonl" --predictions "$out/student_free.jsonl" \
  --json "$out/student_free.json" | grep -E 'intent accuracy|slot P|slot errors|exact'
