#!/usr/bin/env bash
# A public dataset through the same path as the built-in workload: import, a "base" teacher,
# 50% structured pruning, distillation; teacher, pruned and student evaluated on the dev split.
#
#   scripts/dataset_workload.sh banking77 [EPOCHS] [DISTILL_EPOCHS]
#   scripts/dataset_workload.sh snips [EPOCHS] [DISTILL_EPOCHS]
#
# Reads ../shared/data/<dataset>/ beside the checkout; writes runs/<dataset>/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="${1:?usage: dataset_workload.sh banking77|snips [EPOCHS] [DISTILL_EPOCHS]}"
epochs="${2:-4}"
distill_epochs="${3:-2}"
bin="$root/build/shrike"
shared="${SHRIKE_SHARED:-$root/../shared}/data/$name"
out="$root/runs/$name"
mkdir -p "$out"
case "$name" in
  banking77) train_src="$shared/train.csv"; dev_src="$shared/dev.csv" ;;
  snips) train_src="$shared/train"; dev_src="$shared/dev" ;;
  *) echo "dataset_workload.sh: unknown dataset $name (banking77, snips)" >&2; exit 1 ;;
esac
"$bin" data import --format "$name" "$train_src" -o "$out/train.jsonl"
"$bin" data import --format "$name" "$dev_src" -o "$out/dev.jsonl"
"$bin" train --data "$out/train.jsonl" --dev "$out/dev.jsonl" --preset base --epochs "$epochs" \
    --no-progress -o "$out/teacher.gguf"
"$bin" prune "$out/teacher.gguf" --heads 0.5 --ffn 0.55 --calib "$out/train.jsonl" -o "$out/pruned.gguf"
"$bin" distill --teacher "$out/teacher.gguf" --student "$out/pruned.gguf" --data "$out/train.jsonl" \
    --dev "$out/dev.jsonl" --alpha 0.5 --temp 2 --epochs "$distill_epochs" \
    --no-progress -o "$out/student.gguf"
for m in teacher pruned student; do
  echo "== $m"
  "$bin" eval -m "$out/$m.gguf" --task "$out/dev.jsonl" --json "$out/$m.dev.json" --confusions 3
done
