#!/usr/bin/env bash
# Coverage-guided fuzzing of shrike's parsers with libFuzzer, AddressSanitizer (+ leak checks) and
# UndefinedBehaviorSanitizer:
#   scripts/fuzz.sh TARGET SECONDS   build and run fuzz/TARGET_fuzzer.cc for SECONDS
#   scripts/fuzz.sh all SECONDS      each target in turn, SECONDS each
#   scripts/fuzz.sh list             the targets
# Builds with clang into build-fuzz/ (only the fuzzers and the libraries they link). Each run
# starts from the committed seeds in fuzz/corpus/TARGET and grows a working corpus in
# build-fuzz/corpus/TARGET (kept between runs, never committed). A crash, leak, sanitizer report
# or a unit slower than FUZZ_UNIT_TIMEOUT seconds (default 60) stops the run, leaves the input in build-fuzz/artifacts/TARGET/ and
# makes the script fail. Extra libFuzzer flags: FUZZ_FLAGS="-dict=..." ; FUZZ_PARALLEL=N runs N
# targets at once (default 1). The last lines of each run (executions, cov:, ft:) are what docs/FUZZING.md records.
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
# SHRIKE_FUZZ_CONFIGURED=1: $build is already a clang ASan + UBSan build with -DSHRIKE_FUZZ=ON
# (scripts/test.sh's sanitizer pass, which builds the fuzzers beside the tests): keep its
# configuration. Otherwise configure a build of only the fuzzers and their libraries.
if [ "${SHRIKE_FUZZ_CONFIGURED:-0}" = 1 ]; then
  grep -q '^SHRIKE_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null ||
    { echo "fuzz.sh: $build is not configured with -DSHRIKE_FUZZ=ON" >&2; exit 2; }
else
  # -g1 (line tables) through CMAKE_CXX_FLAGS_DEBUG: Debug's default -g would come after it.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DCMAKE_CXX_COMPILER=clang++ -DSHRIKE_FUZZ=ON -DSHRIKE_TESTS=OFF -DSHRIKE_BENCHMARKS=OFF \
    -DCMAKE_CXX_FLAGS="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
    >/dev/null
fi
fuzzers=()
for t in "${run[@]}"; do fuzzers+=("fuzz_$t"); done
cmake --build "$build" -j"$jobs" --target "${fuzzers[@]}"

# One target's run; its summary (or the failure and its log tail) is printed when it ends.
run_one() {
  local t=$1 corpus="$build/corpus/$1" artifacts="$build/artifacts/$1" log="$build/fuzz-$1.log"
  mkdir -p "$corpus" "$artifacts"
  # shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
  # The slowest units known take ~2 s under ASan + coverage (the constraint compilers' work bound,
  # docs/FUZZING.md); 60 s leaves room for a loaded machine, and anything slower is a finding.
  if ! "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout="${FUZZ_UNIT_TIMEOUT:-60}" \
      -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/" ${FUZZ_FLAGS:-} \
      "$corpus" "fuzz/corpus/$t" 2>"$log"; then
    tail -n 60 "$log" >&2
    echo "fuzz.sh: $t FAILED; the input is in $artifacts/ and the log in $log" >&2
    return 1
  fi
  # The last status line (executions, coverage, features, corpus) and the final stats.
  echo "== fuzz $t ${seconds}s: $(grep -E '^#[0-9]+' "$log" | tail -n 1)" \
    "$(grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" | tr -s ' \n' ' ')"
}

# FUZZ_PARALLEL=N runs N targets at once (CI: one per core); each is one process and leaves its
# verdict in $build/fuzz-TARGET.ok or .failed.
parallel=${FUZZ_PARALLEL:-1}
running=0
for t in "${run[@]}"; do
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
  rm -f "$build/fuzz-$t.ok" "$build/fuzz-$t.failed"
  echo "== fuzz $t for ${seconds}s"
  (if run_one "$t"; then touch "$build/fuzz-$t.ok"; else touch "$build/fuzz-$t.failed"; fi) &
  running=$((running + 1))
done
wait
failed=()
for t in "${run[@]}"; do
  [ -f "$build/fuzz-$t.ok" ] || failed+=("$t")
done
if ((${#failed[@]})); then
  echo "fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
