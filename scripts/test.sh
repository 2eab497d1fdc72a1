#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: set-up, a warnings-as-errors build, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh -DSHRIKE_WERROR=ON
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
