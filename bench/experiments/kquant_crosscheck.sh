#!/usr/bin/env bash
# shrike against llama.cpp on the same GGUF files, for every weight type llama.cpp's own
# llama-quantize writes from one F16 model: top-1 agreement and mean KL(llama.cpp || shrike) of
# the next-token distributions at every position of one sequence (issue "The models people
# download", acceptance 1). Needs a llama.cpp build beside the project (never inside it):
#   bench/experiments/kquant_crosscheck.sh LLAMA_CPP_DIR [OUT_DIR]
# LLAMA_CPP_DIR holds include/, ggml/include/ and build/bin/{llama-quantize,libllama.so}.
# Environment: TYPES (llama-quantize names), TOKENS (sequence length, default 256), MODEL (an F16
# or F32 GGUF to start from instead of the random-weight Llama synthesised here; its tensors'
# rows must be multiples of 256 for the k-quants to be used throughout), TEXT (a text file: its
# first TOKENS tokens through MODEL's tokenizer instead of random ids).
set -euo pipefail
cd "$(dirname "$0")/../.."
llama=$(cd "$1" && pwd)
out=${2:-runs/kquant_crosscheck}
mkdir -p "$out"
types=${TYPES:-"Q8_0 Q6_K Q5_K_M Q4_K_M Q3_K_M Q2_K IQ4_NL IQ4_XS"}
ntok=${TOKENS:-256}
[ -x build/shrike ] || scripts/build.sh
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

g++ -O2 -std=c++17 bench/experiments/llamacpp_logits.cc -I"$llama/include" \
  -I"$llama/ggml/include" -L"$llama/build/bin" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$llama/build/bin" -o "$out/llamacpp_logits"

base=${MODEL:-$out/base-f16.gguf}
if [ -z "${MODEL:-}" ] && [ ! -f "$base" ]; then
  # A Llama shape whose every matrix row is a multiple of 256, with a real 32k vocabulary.
  build/shrike synth --dim 512 --layers 4 --heads 8 --kv-heads 4 --ffn 1536 --vocab 32000 \
    --type f16 --seed 7 -o "$base"
fi
if [ -n "${TEXT:-}" ]; then
  # A page of held-out text through the model's own tokenizer, its first TOKENS ids.
  build/shrike tokenize -m "$base" --text-file "$TEXT" --add-special |
    python3 -c "import sys; ids = sys.stdin.read().split()[:$ntok]; assert len(ids) == $ntok, f'{len(ids)} tokens in TEXT, TOKENS=$ntok'; print(' '.join(ids))" >"$out/tokens.txt"
else
  # The sequence: ids spread over the vocabulary (a random model has no text it prefers).
  python3 -c "import random; r = random.Random(3); print(' '.join(str(r.randrange(3, 32000)) for _ in range($ntok)))" >"$out/tokens.txt"
fi

compare() {  # llama.cpp logits, shrike logits, tokens -> "top1 decided kl max_abs"
  python3 bench/experiments/compare_logits.py "$1" "$2" "$3"
}

printf '| file type | tensors by type | top-1 agreement | top-1 outside near ties | mean KL | max abs logit diff |\n|---|---|---|---|---|---|\n'
for t in F16 $types; do
  f=$out/model-$t.gguf
  if [ "$t" = F16 ]; then
    f=$base
  elif [ ! -f "$f" ]; then
    "$llama/build/bin/llama-quantize" "$base" "$f" "$t" >"$out/quantize-$t.log" 2>&1
  fi
  # llama.cpp's loader lists the file's tensors by type ("- type q4_K:   25 tensors").
  mix=$(LLAMACPP_LOGITS_VERBOSE=1 "$out/llamacpp_logits" "$f" "$out/tokens.txt" \
    "$out/llama-$t.f32" 2 2>&1 | sed -n 's/.*- type *\([a-z0-9_A-Z]*\): *\([0-9]*\) tensors.*/\1 \2/p' |
    sort -k2,2nr | paste -sd, - | sed 's/,/, /g')
  build/shrike logits -m "$f" --tokens "$out/tokens.txt" -o "$out/shrike-$t.f32" -t 2 2>/dev/null
  echo "| $t | $mix | $(compare "$out/llama-$t.f32" "$out/shrike-$t.f32" "$ntok" | awk '{print $1 " | " $2 " | " $3 " | " $4}') |"
done
