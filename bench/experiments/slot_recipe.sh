#!/usr/bin/env bash
# A teacher trained from scratch on a public slot dataset, scored on its dev split free-form and
# with the task schema, slot errors by kind (issue 32). Extra arguments go to `shrike train`.
#
#   bench/experiments/slot_recipe.sh snips|nlupp|demo OUT_DIR [train args...]
#   e.g. bench/experiments/slot_recipe.sh snips runs/slots/p1 --preset base --epochs 8 --batch-tokens 1024
#        bench/experiments/slot_recipe.sh snips runs/slots/old --preset base --epochs 3 --merges -1
#
# snips/nlupp: trains on ../shared/data/<name>/train, scores on its dev split (the test splits
# stay held out). demo: the built-in workload of scripts/demo.sh (8,000 examples), scored on its
# clean test split.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
name="${1:?usage: slot_recipe.sh snips|nlupp|demo OUT_DIR [train args...]}"
out="${2:?usage: slot_recipe.sh snips|nlupp|demo OUT_DIR [train args...]}"
shift 2
bin="$root/build/shrike"
shared="${SHRIKE_SHARED:-$root/../shared}/data"
mkdir -p "$out"
case "$name" in
  snips | nlupp)
    [ -f "$out/train.jsonl" ] || "$bin" data import --format "$name" "$shared/$name/train" -o "$out/train.jsonl"
    [ -f "$out/eval.jsonl" ] || "$bin" data import --format "$name" "$shared/$name/dev" -o "$out/eval.jsonl"
    dev="$out/eval.jsonl" ;;
  demo)
    [ -f "$out/data/train.jsonl" ] || "$bin" data gen --n 8000 -o "$out/data" >/dev/null
    cp "$out/data/train.jsonl" "$out/train.jsonl"
    cp "$out/data/test.jsonl" "$out/eval.jsonl"
    dev="$out/data/dev.jsonl" ;;
  *) echo "slot_recipe.sh: unknown dataset $name (snips, nlupp, demo)" >&2; exit 1 ;;
esac
start=$SECONDS
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bin" train --data "$out/train.jsonl" --dev "$dev" \
  --dev-limit 100 --no-progress -o "$out/model.gguf" "$@"
echo "training: $((SECONDS - start)) s"
echo "== free-form"
"$bin" eval -m "$out/model.gguf" --task "$out/eval.jsonl" --predictions "$out/free.jsonl" \
  --json "$out/free.json" | grep -E 'intent accuracy|slot P|slot errors|exact'
echo "== task schema (values copied from the utterance)"
"$bin" eval -m "$out/model.gguf" --task "$out/eval.jsonl" --task-schema on \
  --json "$out/schema.json" | grep -E 'intent accuracy|slot P|slot errors|exact'
