#!/usr/bin/env bash
# Coverage-guided fuzzing of shrike's parsers with libFuzzer, AddressSanitizer (+ leak checks) and
# UndefinedBehaviorSanitizer:
#   scripts/fuzz.sh TARGET SECONDS   build and run fuzz/TARGET_fuzzer.cc for SECONDS
#   scripts/fuzz.sh all SECONDS      each target in turn, SECONDS each
#   scripts/fuzz.sh list             the targets
# Builds with clang into build-fuzz/ (only the fuzzers and the libraries they link). Each run
# starts from the committed seeds in fuzz/corpus/TARGET and grows a working corpus in
# build-fuzz/corpus/TARGET (kept between runs, never committed). A crash, leak, sanitizer report
# or a unit slower than 25 s stops the run, leaves the input in build-fuzz/artifacts/TARGET/ and
# makes the script fail. Extra libFuzzer flags: FUZZ_FLAGS="-jobs=2 -workers=2" (default: one
# process). The last lines of each run (executions, cov:, ft:) are what docs/FUZZING.md records.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
for f in fuzz/*_fuzzer.cc; do
  t=${f#fuzz/}
  targets+=("${t%_fuzzer.cc}")
done

usage() {
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS   (targets: ${targets[*]})" >&2
  exit 2
}
[ $# -ge 1 ] || usage
if [ "$1" = list ]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi
[ $# -eq 2 ] || usage
what=$1
seconds=$2
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }
if [ "$what" = all ]; then
  run=("${targets[@]}")
else
  [ -f "fuzz/${what}_fuzzer.cc" ] || { echo "fuzz.sh: no fuzz target '$what' (targets: ${targets[*]})" >&2; exit 2; }
  run=("$what")
fi

scripts/setup.sh
jobs=$(nproc)
build=${SHRIKE_FUZZ_BUILD:-build-fuzz}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DSHRIKE_FUZZ=ON -DSHRIKE_TESTS=OFF -DSHRIKE_BENCHMARKS=OFF \
  -DCMAKE_CXX_FLAGS="-O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
  >/dev/null
cmake --build "$build" -j"$jobs" --target $(printf 'fuzz_%s ' "${run[@]}")

failed=()
for t in "${run[@]}"; do
  corpus="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  echo "== fuzz $t for ${seconds}s"
  # shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
  if ! "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/" ${FUZZ_FLAGS:-} \
      "$corpus" "fuzz/corpus/$t" 2>"$build/fuzz-$t.log"; then
    tail -n 60 "$build/fuzz-$t.log" >&2
    echo "fuzz.sh: $t failed; the input is in $artifacts/ and the log in $build/fuzz-$t.log" >&2
    failed+=("$t")
    continue
  fi
  # The last status line (executions, coverage, features, corpus) and the final stats.
  grep -E '^#[0-9]+' "$build/fuzz-$t.log" | tail -n 1
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$build/fuzz-$t.log"
done
if ((${#failed[@]})); then
  echo "fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
