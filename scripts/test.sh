#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine (CI runs this; budget: 30 minutes cold on 2
# cores, see docs/RESULTS.md "CI time"):
#   1. set-up, a warnings-as-errors Release build (GCC) and its tests;
#   2. the same tests built with clang, AddressSanitizer (+ leak checks) and
#      UndefinedBehaviorSanitizer (less the statistical sampling tests, left to step 1), and in
#      the same build the libFuzzer targets (fuzz/), each then run for 20 s, two at a time
#      (FUZZ_SECONDS; SHRIKE_FUZZ=0 skips the runs);
#   3. the threaded tests (thread pool, scheduler, engine, speculation, constrained engine,
#      server) under ThreadSanitizer, building only those targets (SHRIKE_TSAN=0 skips it);
#   4. the aarch64 cross build's kernel, golden, tokenizer and argmax tests under qemu
#      (scripts/cross_aarch64.sh; SHRIKE_CROSS=0 skips it).
# The sanitizer builds compile tests and the CLI at -O0 (SHRIKE_GLUE_O0): half their compile
# time, while the libraries under test keep -O1. One clang build serves the ASan tests and the
# fuzzers: a separate fuzz build would compile every library a third time.
# SHRIKE_SKIP_SANITIZERS=1 runs step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
step() { echo "== test.sh: $1 ($(date -u +%H:%M:%S), ${SECONDS}s so far)"; }

step "Release build"
# Test binaries at -O0 (SHRIKE_TESTS_O0): they are glue around what they test; `shrike` and the
# libraries keep -O2 (kernels -O3), and kernels_test keeps -O2 for its reference loops.
scripts/build.sh -DSHRIKE_WERROR=ON -DSHRIKE_TESTS_O0=ON
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

if [ "${SHRIKE_SKIP_SANITIZERS:-0}" != 1 ]; then
  # -g1 (line tables; CMAKE_CXX_FLAGS_DEBUG, else Debug's own -g comes after it): sanitizer
  # reports keep file:line, the build skips full debug info.
  step "ASan + UBSan build (clang, with the fuzzers)"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DCMAKE_CXX_COMPILER=clang++ -DSHRIKE_FUZZ=ON \
    -DSHRIKE_WERROR=ON -DSHRIKE_BENCHMARKS=OFF -DSHRIKE_GLUE_O0=ON \
    -DCMAKE_CXX_FLAGS="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
    >/dev/null
  cmake --build build-asan -j"$jobs"
  # Left to the Release pass: the statistical tests (chi-square over 10^4-10^5 draws of the
  # same sampling code that the engine tests run under ASan on fewer draws), ~110 CPU-s here,
  # and the longest end-to-end CLI runs (train, prune, distill, quantise, optimize: ~50 CPU-s;
  # the Hugging Face folders through every compression command, ~60 CPU-s; three users' models
  # and data through optimize, ~100 CPU-s; the layers they drive have their own tests under ASan),
  # and the training-convergence checks (a model learns its set, distillation pulls a student
  # towards its teacher, a draft distilled on teacher samples, ~70 CPU-s under ASan: the same
  # trainer code runs under ASan in the shorter Trainer tests) and the 30-second soak (its parts
  # have their own tests; ~28 s), and the tokenizer speed tests (1-2 MB encoded and decoded,
  # ~17 CPU-s: the same encoders run under ASan on the reference vectors).
  asan_skip='^(TokenizerSpeed\.|SpeculativeDistribution\.|SpeculativeSampling\.|Sampler\.DefaultsDrawWhatTheFirstVersionDrew$|Gptq\.BeatsRoundToNearestOnCorrelatedInputs$|OptimizeCli\.MeasuresEveryAvailableStageAndCachesModels$|WorkloadCli\.GenTrainEvalPruneDistillGenerate$|Checkpoints/RealArchCli\.|Users/OptimizeUsers\.|Trainer\.TinyModelLearnsItsTrainingSet$|Trainer\.DistillationPullsTheStudentTowardsTheTeacher$|TeacherSamples\.DraftDistilledOnThemApproachesTheTeacher$|Soak\.ShortSoakOfStories260KPassesEveryCriterion$)'
  (cd build-asan && ctest --output-on-failure -j"$jobs" --timeout 900 -E "$asan_skip")
  if [ "${SHRIKE_FUZZ:-1}" = 1 ]; then
    step "fuzzing, ${FUZZ_SECONDS:-20} s per target"
    SHRIKE_FUZZ_BUILD=build-asan SHRIKE_FUZZ_CONFIGURED=1 FUZZ_PARALLEL=$jobs \
      scripts/fuzz.sh all "${FUZZ_SECONDS:-20}"
  fi
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
if [ "${SHRIKE_SKIP_SANITIZERS:-0}" != 1 ] && [ "${SHRIKE_CROSS:-1}" = 1 ]; then
  step "aarch64 cross build and its tests under qemu"
  SHRIKE_CROSS_CI=1 scripts/cross_aarch64.sh
fi
step "done"
