#!/usr/bin/env bash
# The architectures teams fine-tune, checked against llama.cpp (issue "The models people
# download", acceptance 2): for each, a tiny random-weight Hugging Face folder with the real
# config fields and vocabulary size (`shrike synth` + `shrike export-hf`), converted by `shrike
# convert`; llama.cpp runs the converted GGUF, shrike runs the folder itself, and the two engines'
# logits at every position of one sequence are compared (top-1 agreement, mean KL, max diff).
# The sequence is longer than the sliding window, so windowed layers mask for real.
#   bench/experiments/arch_crosscheck.sh LLAMA_CPP_DIR [IK_LLAMA_DIR] [OUT_DIR]
# Each *_DIR holds include/, ggml/include/ and build/bin/libllama.so (BUILD_SHARED_LIBS=ON).
# Architectures llama.cpp's build does not know (qwen3 and gemma3 are newer than c392e5094) run
# on ik_llama.cpp when IK_LLAMA_DIR is given, and are skipped with a note otherwise.
# Environment: ARCHS (default: all of llama mistral qwen2 qwen2-yarn qwen3 gemma2 gemma3 phi3
# phi3-longrope), TOKENS (default 64).
# phi3-longrope: the sequence is inside the original context, so both engines rotate with the
# short factors and the attention factor (llama.cpp picks the long ones only for a context past
# the original one, shrike for positions past it); the long factors are unit-tested.
# mistral: llama.cpp runs Mistral files as llama and ignores their sliding window, so the row is
# Mistral-7B-v0.2's shape (no window); shrike's window is tested in tests/model/hf_arch_test.cc.
set -euo pipefail
cd "$(dirname "$0")/../.."
llama=$(cd "${1:?usage: arch_crosscheck.sh LLAMA_CPP_DIR [IK_LLAMA_DIR] [OUT_DIR]}" && pwd)
ik=${2:+$(cd "$2" && pwd)}
out=${3:-runs/arch_crosscheck}
archs=${ARCHS:-"llama mistral qwen2 qwen2-yarn qwen3 gemma2 gemma3 phi3 phi3-longrope"}
ntok=${TOKENS:-64}
mkdir -p "$out"
[ -x build/shrike ] || scripts/build.sh
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

build_peer() {  # DIR NAME [-DIK_LLAMA]
  local dir=$1 name=$2 libs="-lllama -lggml" lib_dirs=() flags=() d
  shift 2
  # llama.cpp puts its libraries in build/bin, ik_llama.cpp beside their sources.
  for d in $(find "$dir/build" -name 'libllama.so' -o -name 'libggml.so' | xargs -n1 dirname | sort -u); do
    flags+=(-L"$d" -Wl,-rpath,"$d")
  done
  [ -e "$dir/build/bin/libggml-base.so" ] && libs="$libs -lggml-base"
  # shellcheck disable=SC2086
  g++ -O2 -std=c++17 "$@" bench/experiments/llamacpp_logits.cc -I"$dir/include" \
    -I"$dir/ggml/include" "${flags[@]}" $libs -o "$out/logits-$name"
}
build_peer "$llama" llama.cpp
[ -n "$ik" ] && build_peer "$ik" ik_llama.cpp -DIK_LLAMA
# Which architectures a build knows: the names in its llama-arch.cpp table.
knows() { grep -q "\"$2\"" "$1/src/llama-arch.cpp" 2>/dev/null || grep -q "\"$2\"" "$1/src/llama.cpp"; }

python3 -c "import random; r = random.Random(3); print(' '.join(str(r.randrange(3, 30000)) for _ in range($ntok)))" >"$out/tokens.txt"

echo "| architecture (Hugging Face class) | vocabulary | what it exercises | peer | top-1 agreement | top-1 outside near ties | mean KL | max abs logit diff |"
echo "|---|---|---|---|---|---|---|---|"
for arch in $archs; do
  # Real vocabulary sizes and the published configs' distinctive fields; small widths.
  ctx=512
  [ "$arch" = phi3-longrope ] && ctx=8192
  case $arch in
    llama) flags=(--vocab 128256 --vocab-type llama-bpe --tied --rope-theta 500000
                  --llama3-rope-factor 32 --llama3-rope-original 64 --layers 3)
           what="Llama-3 rope scaling, GQA" ;;
    mistral) flags=(--vocab 32000 --vocab-type spm --layers 3 --rope-theta 1000000)
             what="SentencePiece 32k, untied output" ;;
    qwen2) flags=(--vocab 151936 --vocab-type qwen2 --tied --layers 3)
           what="q/k/v biases, NeoX rope" ;;
    qwen2-yarn) flags=(--vocab 151936 --vocab-type qwen2 --tied --layers 3 --yarn-factor 4
                       --rope-original 32)
                what="YaRN x4 over an original context of 32 (Qwen2.5's long-context recipe)" ;;
    qwen3) flags=(--vocab 151936 --vocab-type qwen2 --tied --layers 3 --head-dim 32
                  --rope-theta 1000000)
           what="q/k RMSNorm, head_dim != dim/heads" ;;
    # llama.cpp's gemma2 graph only runs the published depths (26 = gemma-2-2b).
    gemma2) flags=(--vocab 256000 --layers 26 --sliding-window 16)
            what="GeGLU, post norms, soft-capping 50/30, every other layer sliding (16)" ;;
    gemma3) flags=(--vocab 262144 --layers 8 --head-dim 32 --sliding-window 16
                   --rope-theta 1000000 --rope-linear-factor 8)
            what="q/k norms, 5 of 6 layers sliding (16) at rope base 1e4, linear rope x8" ;;
    # The real Phi-3 vocabulary where ../shared has it: llama.cpp looks its special tokens up.
    phi3) flags=(--vocab-from ../shared/reference/tokenizers/ggml-vocab-phi-3.gguf --layers 3
                 --sliding-window 16)
          what="fused q/k/v and gate/up, every layer sliding (16)" ;;
    phi3-longrope) flags=(--vocab-from ../shared/reference/tokenizers/ggml-vocab-phi-3.gguf
                          --layers 3 --sliding-window 16 --longrope
                          --rope-original 4096)
                   what="LongRoPE short factors and attention factor (Phi-3-128k's recipe)" ;;
    *) echo "unknown architecture $arch" >&2; exit 2 ;;
  esac
  peer=llama.cpp
  synth_arch=$arch
  synth_arch=${arch%-*}
  [ "$arch" = mistral ] && synth_arch=llama
  if ! knows "$llama" "$synth_arch"; then
    if [ -n "$ik" ] && knows "$ik" "$arch"; then peer=ik_llama.cpp; else
      echo "| $arch | | | none: llama.cpp at $(git -C "$llama" rev-parse --short HEAD 2>/dev/null) does not know it | | | | |"
      continue
    fi
  fi
  build/shrike synth --arch "$synth_arch" --dim 64 --heads 4 --kv-heads 2 --ffn 128 --context "$ctx" \
    --type f32 --seed 5 "${flags[@]}" -o "$out/$arch-synth.gguf" >"$out/$arch.log" 2>&1
  rm -rf "$out/$arch-hf"
  build/shrike export-hf "$out/$arch-synth.gguf" -o "$out/$arch-hf" --type f32 >>"$out/$arch.log" 2>&1
  if [ "$arch" = mistral ]; then  # Mistral-7B-v0.2's config: MistralForCausalLM, no window
    python3 - "$out/$arch-hf/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=None)
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
  fi
  class=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['architectures'][0])" "$out/$arch-hf/config.json")
  vocab=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$out/$arch-hf/config.json")
  build/shrike convert "$out/$arch-hf" -o "$out/$arch.gguf" --type f32 >>"$out/$arch.log" 2>&1
  # ik_llama.cpp takes an f32 V cache only with flash attention, whose CPU kernel refuses f32:
  # its rows use an f16 cache (a rounding of keys and values shrike's f32 cache does not have).
  kv=f32
  [ "$peer" = ik_llama.cpp ] && kv=f16
  "$out/logits-$peer" "$out/$arch.gguf" "$out/tokens.txt" "$out/$arch-peer.f32" 2 "$kv" \
    2>"$out/$arch-peer.log"
  build/shrike logits -m "$out/$arch-hf" --tokens "$out/tokens.txt" -o "$out/$arch-shrike.f32" \
    -t 2 >/dev/null 2>&1
  r=$(python3 bench/experiments/compare_logits.py "$out/$arch-peer.f32" "$out/$arch-shrike.f32" "$ntok")
  [ "$kv" = f16 ] && peer="$peer (f16 KV)"
  echo "| $arch ($class) | $vocab | $what | $peer | $(echo "$r" | awk '{print $1 " | " $2 " | " $3 " | " $4}') |"
done
