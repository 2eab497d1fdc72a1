#!/usr/bin/env bash
# Kernel speed against the memory roofline: set up, build, write a ~110M-parameter random-weight
# Llama model (Q8_0, tied output) and measure its decode against this machine's read bandwidth.
# (This was scripts/demo.sh before the demo became the staged report, scripts/demo.sh.)
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh
scripts/build.sh
mkdir -p out
model=out/synth-110M-q8_0.gguf
[ -f "$model" ] || build/shrike synth --dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 \
  --type q8_0 --tied -o "$model"
build/shrike bench -m "$model" --roofline
