#!/usr/bin/env bash
# The compression commands on the checkpoints people bring, checked against llama.cpp: Qwen2.5-,
# Llama-3.2- and Mistral-shaped Hugging Face folders (random weights, the real vocabulary sizes
# and config fields, written by `shrike export-hf`), each taken from the folder directly through
# `convert`, `quantize --method gptq` and `--method awq` with calibration, `prune` by depth +
# width + heads + FFN, `distill` of the pruned student and of a fresh draft. llama.cpp loads
# every GGUF they write and continues five prompts greedily; the table says whether its
# continuations (the next token and three more) are shrike's. Needs a llama.cpp build beside the
# project (never inside this repo):
#   bench/experiments/llamacpp_arch_check.sh LLAMA_BIN_DIR [WORK_DIR]
# LLAMA_BIN_DIR holds llama-simple. Prints a markdown table (docs/RESULTS.md keeps the last one).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin_dir=${1:?usage: bench/experiments/llamacpp_arch_check.sh LLAMA_BIN_DIR [WORK_DIR]}
work=${2:-$(mktemp -d)}
simple="$bin_dir/llama-simple"
[ -x "$simple" ] || { echo "no llama-simple in $bin_dir" >&2; exit 2; }
[ -x build/shrike ] || scripts/build.sh
shrike=$PWD/build/shrike
mkdir -p "$work"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
prompts=("where is my order" "i want a refund for the shoes" "the customer asked the agent"
         "please change my address" "talk to a human")

"$shrike" data gen --n 200 --lang en --seed 3 -o "$work/data" >/dev/null 2>&1
data="$work/data/train.jsonl"

# make_folder NAME MODEL_TYPE SYNTH_FLAGS...: the folder a user would bring.
make_folder() {
  local name=$1 type=$2
  shift 2
  "$shrike" synth --dim 64 --layers 3 --heads 4 --kv-heads 2 --ffn 96 --context 256 --type f32 \
    --seed 9 "$@" -o "$work/$name-synth.gguf" 2>/dev/null
  "$shrike" export-hf "$work/$name-synth.gguf" -o "$work/$name-hf" --type bf16 2>/dev/null
  python3 - "$work/$name-hf" "$type" <<'EOF'
import json, sys
d, t = sys.argv[1], sys.argv[2]
tc = json.load(open(d + "/tokenizer_config.json"))
tc["chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
json.dump(tc, open(d + "/tokenizer_config.json", "w"))
if t == "mistral":
    c = json.load(open(d + "/config.json"))
    c.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=None)
    c.pop("attention_bias", None); c.pop("mlp_bias", None)
    json.dump(c, open(d + "/config.json", "w"))
EOF
}

echo "| shape | file | shrike | llama.cpp loads | same continuation (of ${#prompts[@]}) |"
echo "|---|---|---|---|---|"
for shape in qwen2 llama3 mistral; do
  case $shape in
    qwen2) make_folder qwen2 qwen2 --arch qwen2 --vocab 151936 --vocab-type qwen2 --tied ;;
    llama3) make_folder llama3 llama --vocab 128256 --vocab-type llama-bpe --tied \
              --rope-theta 500000 --llama3-rope-factor 32 --llama3-rope-original 64 ;;
    mistral) make_folder mistral mistral --vocab 32000 --vocab-type spm ;;
  esac
  hf="$work/$shape-hf"
  out="$work/$shape"
  mkdir -p "$out"
  "$shrike" convert "$hf" -o "$out/converted.gguf" --type f32 2>/dev/null
  "$shrike" quantize "$hf" -o "$out/gptq.gguf" --type q8_0 --method gptq --calib "$data" \
    --calib-limit 64 2>/dev/null
  "$shrike" quantize "$hf" -o "$out/awq.gguf" --type q4_0 --method awq --calib "$data" \
    --calib-limit 64 2>/dev/null
  "$shrike" prune "$hf" -o "$out/pruned.gguf" --calib "$data" --calib-limit 64 --layers 1 \
    --hidden 0.5 --heads 0.5 --ffn 0.5 2>/dev/null
  "$shrike" distill --teacher "$hf" --student "$out/pruned.gguf" --data "$data" --epochs 1 \
    -o "$out/student.gguf" 2>/dev/null
  "$shrike" distill --teacher "$hf" --student-preset draft --dim 32 --layers 1 --heads 2 \
    --kv-heads 1 --ffn 64 --data "$data" --epochs 1 -o "$out/draft.gguf" 2>/dev/null
  for f in converted gptq awq pruned student draft; do
    file="$out/$f.gguf"
    loads=yes
    same=0
    for p in "${prompts[@]}"; do
      ours=$("$shrike" generate -m "$file" -p "$p" -n 4 --temp 0 2>/dev/null)
      if ! theirs=$("$simple" -m "$file" -n 4 "$p" 2>/dev/null); then
        loads=no
        break
      fi
      # llama-simple echoes the prompt (after the BOS token's text, where one is added) before
      # the continuation.
      [ "${theirs#*"$p"}" = "$ours" ] && same=$((same + 1))
    done
    echo "| $shape | $f | yes | $loads | $same |"
  done
done
