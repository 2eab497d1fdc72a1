#!/usr/bin/env bash
# Cross-builds shrike's portable layers for aarch64 (Debian's g++-aarch64-linux-gnu, the CMake
# toolchain file cmake/aarch64-linux-gnu.cmake) and runs their tests under qemu user-mode
# emulation on two CPUs:
#   -cpu max         (Armv8.x with SDOT): every NEON kernel, with and without SDOT, against the
#                    scalar reference for every weight type and odd shapes (kernels_test), the
#                    stories260K golden test on every target (model_test), the tokenizer
#                    reference vectors (tokenizer_test), the NEON argmax (sampler_test) and the
#                    core tests;
#   -cpu cortex-a53  (Armv8.0, no SDOT): the run-time detection falls back to plain NEON
#                    (kernel dispatch and invariance tests, the golden test).
# Each run names the kernel targets it expects (SHRIKE_EXPECT_ISAS), and a skipped test is a
# failure here (the golden and vector tests need ../shared beside the checkout).
# Only the layers that need no library beyond the C++ library and nlohmann_json are built
# (SHRIKE_LIBRARIES_ONLY); GoogleTest is compiled from Debian's sources (/usr/src/googletest).
# Build directory: build-aarch64 (SHRIKE_CROSS_BUILD_DIR overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
start=$(date +%s)

packages=(g++-aarch64-linux-gnu qemu-user cmake ninja-build libgtest-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "cross_aarch64: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

shared="${SHRIKE_SHARED:-$root/../shared}"
if [ ! -f "$shared/reference/stories260K/golden.json" ]; then
  echo "cross_aarch64: needs the shared reference data at $shared (or SHRIKE_SHARED):" \
       "reference/stories260K and reference/tokenizers" >&2
  exit 1
fi

build="${SHRIKE_CROSS_BUILD_DIR:-build-aarch64}"
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" "${launcher[@]}" \
  -DSHRIKE_LIBRARIES_ONLY=ON -DSHRIKE_BENCHMARKS=OFF -DSHRIKE_WERROR=ON \
  -DSHRIKE_GTEST_SOURCE_DIR=/usr/src/googletest \
  -Dnlohmann_json_DIR=/usr/share/cmake/nlohmann_json >/dev/null
# SHRIKE_CROSS_CI=1 (scripts/test.sh): the kernel, golden and tokenizer runs on -cpu max only,
# which is what CI has time for; the core tests and the cortex-a53 runs are left to a full run.
ci=${SHRIKE_CROSS_CI:-0}
targets=(kernels_test model_test tokenizer_test sampler_test)
[ "$ci" = 1 ] || targets+=(core_test)
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)"
built=$(date +%s)

logs="$build/cross-logs"
mkdir -p "$logs"
# run NAME CPU EXPECTED_ISAS BINARY GTEST_FILTER [SHARD TOTAL]: one test binary (or GoogleTest's
# shard SHARD of TOTAL of it) under qemu, its log in $logs.
run() {
  local name=$1 cpu=$2 isas=$3 bin=$4 filter=$5 shard=${6:-0} total=${7:-1}
  local log="$logs/$name.log"
  if SHRIKE_SHARED="$shared" SHRIKE_EXPECT_ISAS="$isas" \
      GTEST_SHARD_INDEX="$shard" GTEST_TOTAL_SHARDS="$total" \
      qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "$cpu" "$build/tests/$bin" \
      --gtest_filter="$filter" >"$log" 2>&1; then
    if grep -q "SKIPPED" "$log"; then
      echo "cross_aarch64: $name: a test skipped (see $log):" >&2
      grep "SKIPPED" "$log" | head -5 >&2
      return 1
    fi
    echo "cross_aarch64: $name: $(grep -E '^\[  PASSED  \]' "$log") ($(grep -m1 '^kernel targets' "$log" || echo "cpu $cpu"))"
  else
    echo "cross_aarch64: $name FAILED (cpu $cpu), last lines of $log:" >&2
    tail -30 "$log" >&2
    return 1
  fi
}

# Two runs at a time (the emulator is single-threaded per process): the long kernel test in two
# GoogleTest shards, one beside each of the shorter runs.
pids=()
(
  run kernels-max-1 max "scalar neon neon_dot" kernels/kernels_test '*' 0 2
  run tokenizer-max max "scalar neon neon_dot" tokenizer/tokenizer_test \
    'TokenizerVectors*:*/TokenizerVectorsBpe.*'
  run sampler-max max "scalar neon neon_dot" decode/sampler_test 'Sampler.Argmax*'  # NEON
) & pids+=($!)
(
  run kernels-max-2 max "scalar neon neon_dot" kernels/kernels_test '*' 1 2
  run golden-max max "scalar neon neon_dot" model/model_test '*GoldenTest*:TokenizerGolden.*'
  [ "$ci" = 1 ] && exit 0
  run core-max max "scalar neon neon_dot" core/core_test '*'
  run kernels-a53 cortex-a53 "scalar neon" kernels/kernels_test \
    'Isa.*:MatmulDispatch.*:Types/MatmulInvariance.*:KvTypes/*'
  run golden-a53 cortex-a53 "scalar neon" model/model_test '*GoldenTest*'
) & pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
end=$(date +%s)
echo "cross_aarch64: build $((built - start)) s, emulated tests $((end - built)) s," \
     "total $((end - start)) s"
exit $status
