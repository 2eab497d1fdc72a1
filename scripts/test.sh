#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: set-up, a warnings-as-errors Release build
# and its tests, then the same tests built with AddressSanitizer (+ leak checks) and
# UndefinedBehaviorSanitizer. SHRIKE_SKIP_SANITIZERS=1 runs the Release pass only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

scripts/build.sh -DSHRIKE_WERROR=ON
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

if [ "${SHRIKE_SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSHRIKE_WERROR=ON \
    -DSHRIKE_BENCHMARKS=OFF \
    -DCMAKE_CXX_FLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
    >/dev/null
  cmake --build build-asan -j"$jobs"
  (cd build-asan && ctest --output-on-failure -j"$jobs" --timeout 900)
fi
