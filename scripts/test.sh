#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine (CI runs this; budget: 30 minutes cold on 2
# cores, see docs/RESULTS.md "CI time"):
#   1. set-up, a warnings-as-errors Release build and its tests;
#   2. the same tests built with AddressSanitizer (+ leak checks) and UndefinedBehaviorSanitizer;
#   3. the threaded tests (thread pool, scheduler, engine, speculation, constrained engine,
#      server) under ThreadSanitizer, building only those targets (SHRIKE_TSAN=0 skips it);
#   4. with SHRIKE_FUZZ=1: each libFuzzer target for 30 s (scripts/fuzz.sh; FUZZ_SECONDS);
#   with SHRIKE_CROSS=1 (after step 1): the aarch64 cross build's tests under qemu.
# The sanitizer builds compile tests and the CLI at -O0 (SHRIKE_GLUE_O0): half their compile
# time, while the libraries under test keep -O1. Steps 4 and the cross tests are opt-in until the
# run fits the 30-minute budget with them (docs/RESULTS.md "CI time").
# SHRIKE_SKIP_SANITIZERS=1 runs step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
step() { echo "== test.sh: $1 ($(date -u +%H:%M:%S), ${SECONDS}s so far)"; }

step "Release build"
scripts/build.sh -DSHRIKE_WERROR=ON
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)
# aarch64 NEON/golden/tokenizer tests under qemu: opt-in (SHRIKE_CROSS=1) like TSan and fuzzing,
# until the run fits its 30-minute budget with it (6.5 minutes warm, up to 18 cold).
[ "${SHRIKE_CROSS:-0}" != 1 ] || scripts/cross_aarch64.sh

if [ "${SHRIKE_SKIP_SANITIZERS:-0}" != 1 ]; then
  # -g1 (line tables; CMAKE_CXX_FLAGS_DEBUG, else Debug's own -g comes after it): sanitizer
  # reports keep file:line, the build skips full debug info.
  step "ASan + UBSan build"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DSHRIKE_WERROR=ON -DSHRIKE_BENCHMARKS=OFF -DSHRIKE_GLUE_O0=ON \
    -DCMAKE_CXX_FLAGS="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
    >/dev/null
  cmake --build build-asan -j"$jobs"
  (cd build-asan && ctest --output-on-failure -j"$jobs" --timeout 900)
fi
if [ "${SHRIKE_SKIP_SANITIZERS:-0}" != 1 ] && [ "${SHRIKE_TSAN:-1}" = 1 ]; then
  # Only what has threads that share data: each test binary is a CTest label (its name).
  step "ThreadSanitizer build"
  tsan_tests=(core_test scheduler_test engine_test speculation_test constrained_engine_test
              server_test)
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DSHRIKE_WERROR=ON -DSHRIKE_BENCHMARKS=OFF -DSHRIKE_GLUE_O0=ON \
    -DCMAKE_CXX_FLAGS="-O1 -fsanitize=thread" >/dev/null
  cmake --build build-tsan -j"$jobs" --target shrike "${tsan_tests[@]}"
  labels=$(IFS='|'; echo "^(${tsan_tests[*]})\$")
  # halt_on_error: a race fails the test even when it is in a server child process.
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --output-on-failure -j"$jobs" --timeout 900 -L "$labels")
fi
if [ "${SHRIKE_SKIP_SANITIZERS:-0}" != 1 ] && [ "${SHRIKE_FUZZ:-0}" = 1 ]; then
  step "fuzzing"
  FUZZ_PARALLEL=$jobs scripts/fuzz.sh all "${FUZZ_SECONDS:-30}"
fi
step "done"
