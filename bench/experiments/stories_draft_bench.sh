#!/usr/bin/env bash
# Issue 16, acceptance 1's stories260K draft, as commands: a draft distilled from stories260K on
# the teacher's own samples (`shrike distill --teacher-samples`: the model's training text is not
# in ../shared), against a random draft of the same shape and the teacher as its own draft.
# Each draft is one `shrike bench --spec draft` run: plain greedy and speculation interleaved on
# the same story prompts (decode tok/s, answer latency, acceptance, accepted tokens per step,
# draft time share, outputs differing from plain greedy), then every prompt again 32 at a time
# (differing outputs, KV blocks left in use).
#
#   bench/experiments/stories_draft_bench.sh [OUT_DIR]   (default /tmp/shrike-stories-draft; THREADS=1 for
#                                               the benchmark; the draft: SAMPLES=2000,
#                                               SAMPLE_LEN=256, EPOCHS=3, LAYERS=1, TRAIN_THREADS=2)
#
# The draft is made once (9 minutes on the shared 2-core development machine) and reused.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-/tmp/shrike-stories-draft}"
bin="$root/build/shrike"
teacher="${SHRIKE_SHARED:-$root/../shared}/reference/stories260K/stories260K.gguf"
if [ ! -f "$teacher" ]; then
  echo "stories_draft_bench: needs $teacher (the shared reference data beside the checkout)" >&2
  exit 1
fi
[ -x "$bin" ] || { echo "stories_draft_bench: build shrike first (scripts/build.sh)" >&2; exit 1; }
threads="${THREADS:-1}"
mkdir -p "$out"
# The teacher's width and heads (dim 64, 8 heads sharing 4 KV heads, FFN 172), fewer layers.
shape="--dim 64 --layers ${LAYERS:-1} --heads 8 --kv-heads 4 --ffn 172"
[ -f "$out/draft.gguf" ] || "$bin" distill --teacher "$teacher" --student-preset draft $shape \
  --teacher-samples "${SAMPLES:-2000}" --sample-len "${SAMPLE_LEN:-256}" --epochs "${EPOCHS:-3}" \
  --alpha 1 --temp 1 --lr 3e-3 --seed 1 -t "${TRAIN_THREADS:-2}" --no-progress -o "$out/draft.gguf"
# Random weights of the same shape (one layer) and vocabulary: a draft that knows nothing.
[ -f "$out/random.gguf" ] || "$bin" synth --dim 64 --layers 1 --heads 8 --kv-heads 4 --ffn 172 \
  --vocab 512 --context 2048 --type f32 --seed 11 -o "$out/random.gguf" >/dev/null

prompts=()
for p in "Once upon a time" "Lily wanted to" "One day, a little boy named Tom" "The sun was" \
  "Tim and his mom went to the park." "There was a big dog" "Sara had a red ball." \
  "The little bird could not fly" "Ben saw a cat" "Mom said," "It was a rainy day." \
  "Anna loved her toy"; do
  prompts+=(--spec-prompts "$p")
done
for d in random draft teacher; do
  model="$out/$d.gguf"
  [ "$d" = teacher ] && model="$teacher"
  echo "## draft: $d ($model)"
  "$bin" bench -m "$teacher" --spec draft --draft "$model" "${prompts[@]}" -n 128 -t "$threads" \
    -r 3 --spec-concurrency 32
done
