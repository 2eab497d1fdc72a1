#!/usr/bin/env bash
# Speculative decoding (issue 16), as commands: an intent teacher (PRESET, default base; it
# carries the task, so its answers can be constrained to the task's schema), its pruned and
# distilled student, and a small draft trained on the task data with the teacher's tokenizer,
# all quantised to Q8_0 (batch-invariant without the float-weights mode); then, each an
# interleaved run,
#   0. greedy identity (acceptance 1): 200 test prompts with each draft and with prompt lookup,
#      free-form and schema-constrained, alone and 32 at a time: answers that differ from plain
#      greedy alone, KV blocks left in use (on the float teacher);
#   1. batch-1 answer latency on the intent test split (LIMIT, default all 800) with each
#      proposer versus none, constrained to the task's schema with jump-forward (as serve
#      answers), and free-form;
#   2. decode tokens/s on input-grounded prompts (extraction, repetition) with prompt lookup;
#   3. serving throughput at concurrency 1, 8 and 32 with speculation off, ngram and draft
#      (serve constrains a task model's answers to its schema by default), ROUNDS alternating
#      rounds, medians.
#
#   bench/experiments/spec_bench.sh [OUT_DIR]   (default /tmp/shrike-spec; THREADS=1, EPOCHS=2, PRESET=base,
#                                      DRAFT_EPOCHS=8, LIMIT=800, ROUNDS=3, REQUESTS_SCALE=4;
#                                      STUDENT_EXAMPLES=N distils the student on the first N
#                                      training examples only; ONLY_SERVING=1 runs part 3 alone,
#                                      SKIP_IDENTITY=1 skips 0)
#
# The models are made once (about 30 minutes on 2 cores) and reused: an OUT_DIR that already
# holds data/, teacher.gguf, student.gguf and draft.gguf (e.g. links to `shrike optimize`'s
# teacher and student) skips training.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-/tmp/shrike-spec}"
threads="${THREADS:-1}"
epochs="${EPOCHS:-2}"
preset="${PRESET:-base}"
bin="$root/build/shrike"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
mkdir -p "$out"
data="$out/data"

[ -f "$data/test.jsonl" ] || "$bin" data gen -o "$data" >/dev/null
[ -f "$out/teacher.gguf" ] || "$bin" train --data "$data/train.jsonl" --dev "$data/dev.jsonl" \
  --dev-limit 200 --preset "$preset" --epochs "$epochs" --no-progress -t "$threads" -o "$out/teacher.gguf"
[ -f "$out/pruned.gguf" ] || [ -f "$out/student.gguf" ] || "$bin" prune "$out/teacher.gguf" \
  --heads 0.5 --ffn 0.5 --calib "$data/dev.jsonl" -t "$threads" -o "$out/pruned.gguf"
student_data="$data/train.jsonl"
if [ -n "${STUDENT_EXAMPLES:-}" ]; then
  head -n "$STUDENT_EXAMPLES" "$data/train.jsonl" > "$out/student_train.jsonl"
  student_data="$out/student_train.jsonl"
fi
[ -f "$out/student.gguf" ] || "$bin" distill --teacher "$out/teacher.gguf" --student "$out/pruned.gguf" \
  --data "$student_data" --dev "$data/dev.jsonl" --dev-limit 200 --epochs 1 --no-progress \
  -t "$threads" -o "$out/student.gguf"
# The draft: a `draft`-preset shape narrowed to dim 64 (2 layers, 0.10M parameters outside the
# embeddings; a step ~6 us against the base teacher's ~190 us), trained on the task data with the
# teacher's tokenizer (DRAFT_EPOCHS, 8: ~89% of its tokens accepted under the task schema; the
# dim-128 preset accepts 91% at twice the cost per step).
[ -f "$out/draft.gguf" ] || "$bin" train --data "$data/train.jsonl" --dev "$data/dev.jsonl" \
  --dev-limit 200 --preset draft --dim 64 --heads 2 --kv-heads 1 --ffn 192 \
  --tokenizer "$out/teacher.gguf" --epochs "${DRAFT_EPOCHS:-8}" --no-progress -t "$threads" \
  -o "$out/draft.gguf"
for m in teacher student draft; do
  [ -f "$out/$m-q8_0.gguf" ] || "$bin" quantize "$out/$m.gguf" --type q8_0 -o "$out/$m-q8_0.gguf" >/dev/null
done
T="$out/teacher-q8_0.gguf"
D="$out/draft-q8_0.gguf"
St="$out/student-q8_0.gguf"

if [ -z "${ONLY_SERVING:-}" ]; then
if [ -z "${SKIP_IDENTITY:-}" ]; then
echo "## 0. greedy identity: 200 test prompts, alone and 32 at a time (float teacher)"
for schema in "" --spec-schema; do
  for d in student draft; do
    echo "### draft: $d ${schema:-(free-form)}"
    "$bin" bench -m "$out/teacher.gguf" --spec ngram,draft --draft "$out/$d.gguf" \
      --spec-task "$data/test.jsonl" --spec-limit 200 -n 64 -t "$threads" -r 1 \
      --spec-concurrency 32 $schema
  done
done
fi
for schema in --spec-schema ""; do
  for d in "$D" "$St"; do
    echo "## 1. intent answers, batch 1 (test split, first 100), draft $(basename "$d") ${schema:-(free-form)}"
    "$bin" bench -m "$T" --spec ngram,draft --draft "$d" --spec-task "$data/test.jsonl" \
      --spec-limit "${LIMIT:-800}" -n 96 -t "$threads" -r 3 $schema
  done
done

echo "## 2. input-grounded prompts: extraction (intent examples with slot values, which the answer"
echo "##    copies) on the teacher; extraction and repetition prose on stories260K"
python3 - "$data/test.jsonl" "$out/grounded.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for r in [r for r in rows if r["slots"]][:50]:
        f.write(json.dumps({"text": r["text"], "intent": r["intent"], "slots": r["slots"],
                            "lang": r["lang"]}, ensure_ascii=False) + "\n")
PY
for schema in --spec-schema ""; do
  "$bin" bench -m "$T" --spec ngram --spec-task "$out/grounded.jsonl" --spec-limit 50 -n 96 \
    -t "$threads" -r 3 $schema
done
S="$root/../shared/reference/stories260K/stories260K.gguf"
[ -f "$S" ] && "$bin" bench -m "$S" --spec ngram -n 128 -t "$threads" -r 5

fi
echo "## 3. serving throughput (intent test prompts, closed loop)"
python3 - "$data/test.jsonl" "$out/prompts.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][:256]
with open(sys.argv[2], "w") as f:
    for r in rows:
        f.write(json.dumps({"prompt": "intent+slots: " + r["text"].replace("\n", " ") + "\n",
                            "max_tokens": 96}, ensure_ascii=False) + "\n")
PY
port_of() {
  for _ in $(seq 1 600); do
    p=$(grep -o 'listening on http://[^ ]*' "$1" 2>/dev/null | head -1 | sed 's/.*://')
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.1
  done
  cat "$1" >&2; return 1
}
# ROUNDS alternating rounds (3) per concurrency, each server in turn, REQUESTS_SCALE (4) times
# 64 requests (concurrency 1) or 8 per client; ratios against off within each round, medians.
rounds="${ROUNDS:-3}" scale="${REQUESTS_SCALE:-4}"
for c in 1 8 32; do
  for r in $(seq 1 "$rounds"); do
    for mode in off ngram draft; do
      extra=(); [ "$mode" = draft ] && extra=(--draft "$D")
      "$bin" serve "$T" --port 0 --threads "$threads" --spec "$mode" "${extra[@]}" 2>"$out/serve.log" &
      pid=$!
      port=$(port_of "$out/serve.log")
      "$bin" loadtest --url "http://127.0.0.1:$port" --prompts "$out/prompts.jsonl" \
        --concurrency "$c" --max-requests $(((c < 8 ? 64 : 8 * c) * scale)) --timeout 600 \
        --out-json "$out/lt_${mode}_c${c}_r$r.json" >/dev/null
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def tps(mode, c, r):
    return json.load(open(f"{out}/lt_{mode}_c{c}_r{r}.json"))["summary"]["output_tokens_per_s"]
print("| concurrency | off tok/s (median) | ngram vs off (median; rounds) | draft vs off (median; rounds) |")
print("|---:|---:|---|---|")
for c in (1, 8, 32):
    off = [tps("off", c, r) for r in range(1, rounds + 1)]
    cells = []
    for mode in ("ngram", "draft"):
        ratios = [tps(mode, c, r) / off[r - 1] for r in range(1, rounds + 1)]
        cells.append(f"**{statistics.median(ratios):.2f}x**; " + " / ".join(f"{x:.2f}" for x in ratios))
    print(f"| {c} | {statistics.median(off):.0f} | {cells[0]} | {cells[1]} |")
PY
