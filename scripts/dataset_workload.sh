#!/usr/bin/env bash
# A public dataset through the staged report, the same recipe as every other model: import it,
# hold its dev split out as the measured test split (its own test split stays unseen), take dev
# from its train split, and let `shrike optimize` train a teacher and build, serve and measure
# every stage (INT8, pruning + distillation, speculation, batching, the task schema).
#
#   scripts/dataset_workload.sh banking77|snips [EPOCHS] [DISTILL_EPOCHS] [PRESET]
#                                               (default 4, 2, base)
#
# Reads ../shared/data/<dataset>/ beside the checkout; writes runs/<dataset>/ (the splits in data/,
# the models, report.md and report.json in opt/; models are cached between runs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="${1:?usage: dataset_workload.sh banking77|snips [EPOCHS] [DISTILL_EPOCHS] [PRESET]}"
epochs="${2:-4}"
distill_epochs="${3:-2}"
preset="${4:-base}"
bin="$root/build/shrike"
[ -x "$bin" ] || { "$root/scripts/setup.sh" && "$root/scripts/build.sh"; }
shared="${SHRIKE_SHARED:-$root/../shared}/data/$name"
out="$root/runs/$name"
case "$name" in
  banking77) train_src="$shared/train.csv"; dev_src="$shared/dev.csv" ;;
  snips) train_src="$shared/train"; dev_src="$shared/dev" ;;
  *) echo "dataset_workload.sh: unknown dataset $name (banking77, snips)" >&2; exit 1 ;;
esac
mkdir -p "$out/import"
"$bin" data import --format "$name" "$train_src" -o "$out/import/train.jsonl"
"$bin" data import --format "$name" "$dev_src" -o "$out/import/dev.jsonl"
# train -> train + dev (10% per intent), the dataset's dev -> test; test_noisy and calib come
# from these texts through the noise pass, as for any user's data.
"$bin" data split "$out/import/train.jsonl" --dev 0.1 --test 0 -o "$out/data"
cp "$out/import/dev.jsonl" "$out/data/test.jsonl"
rm -f "$out/data/test_noisy.jsonl"
"$bin" optimize --data "$out/data" -o "$out/opt" --preset "$preset" --epochs "$epochs" \
  --distill-epochs "$distill_epochs"
echo "report: $out/opt/report.md"
