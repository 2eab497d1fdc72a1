#!/usr/bin/env bash
# Builds the static edge binary (-DSHRIKE_STATIC=ON: generate, serve, bench, tokenize, synth,
# convert; linked with -static) for x86-64 (build-static/) and, cross-compiled, for aarch64
# (build-static-aarch64/), reports their sizes and `ldd` verdicts, and checks that both run:
# greedy `generate` on stories260K natively and under qemu-aarch64 (with and without SDOT) must
# print the same text, and the x86-64 binary's `serve` must answer /health and a completion.
# Debian ships cpp-httplib only as a shared library, so its source package (Debian's patched
# single header) is fetched with apt-get source into build-static-src/ through a private source
# list, without touching the system's apt configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

packages=(g++ cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev dpkg-dev curl
          g++-aarch64-linux-gnu qemu-user)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if ((${#missing[@]})); then
  echo "static_build: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

model="${SHRIKE_SHARED:-$root/../shared}/reference/stories260K/stories260K.gguf"
if [ ! -f "$model" ]; then
  echo "static_build: needs $model (the shared reference data beside the checkout, or SHRIKE_SHARED)" >&2
  exit 1
fi

# cpp-httplib's source package, once.
src="$root/build-static-src"
httplib_dir=$(ls -d "$src"/cpp-httplib-*/ 2>/dev/null | head -1 || true)
if [ -z "$httplib_dir" ] || [ ! -f "$httplib_dir/httplib.h" ]; then
  mkdir -p "$src/lists/partial"
  echo "deb-src http://deb.debian.org/debian bookworm main" >"$src/sources.list"
  apt_opts=(-o Dir::Etc::SourceList="$src/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o Dir::State::Lists="$src/lists")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$src" && apt-get "${apt_opts[@]}" source cpp-httplib >/dev/null 2>&1)
  httplib_dir=$(ls -d "$src"/cpp-httplib-*/ | head -1)
fi
[ -f "$httplib_dir/httplib.h" ] || { echo "static_build: no httplib.h in $httplib_dir" >&2; exit 1; }

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DSHRIKE_STATIC=ON -DSHRIKE_TESTS=OFF
        -DSHRIKE_BENCHMARKS=OFF -DSHRIKE_WERROR=ON -DSHRIKE_HTTPLIB_SOURCE_DIR="$httplib_dir"
        "${launcher[@]}")
cmake -S . -B build-static "${common[@]}" >/dev/null
cmake --build build-static --target shrike -j"$(nproc)"
cmake -S . -B build-static-aarch64 "${common[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
  -Dnlohmann_json_DIR=/usr/share/cmake/nlohmann_json -DCLI11_DIR=/usr/share/cmake/CLI11 >/dev/null
cmake --build build-static-aarch64 --target shrike -j"$(nproc)"

for b in build-static/shrike build-static-aarch64/shrike; do
  echo "static_build: $b: $(stat -c %s "$b") bytes; ldd: $(ldd "$b" 2>&1 | tr '\n' ' ')"
done
# ldd of a dynamic foreign binary says "not a dynamic executable" too, so check the ELF itself.
for b in build-static/shrike build-static-aarch64/shrike; do
  if readelf -d "$b" 2>/dev/null | grep -q NEEDED; then
    echo "static_build: $b needs shared libraries:" >&2
    readelf -d "$b" | grep NEEDED >&2
    exit 1
  fi
done

args=(generate -m "$model" -p "Once upon a time" -n 48 --temp 0 -t 2)
native=$(build-static/shrike "${args[@]}")
[ -n "$native" ] || { echo "static_build: x86-64 generate printed nothing" >&2; exit 1; }
for cpu in max cortex-a53; do
  emulated=$(qemu-aarch64 -cpu "$cpu" build-static-aarch64/shrike "${args[@]}")
  if [ "$emulated" != "$native" ]; then
    echo "static_build: aarch64 ($cpu) generate differs from x86-64:" >&2
    printf 'x86-64:  %s\naarch64: %s\n' "$native" "$emulated" >&2
    exit 1
  fi
done
echo "static_build: generate on stories260K, same text on x86-64 and aarch64 (max, cortex-a53):"
echo "  $native"

# serve: the static binary's HTTP server answers on loopback.
port=$((20000 + RANDOM % 20000))
build-static/shrike serve -m "$model" --port "$port" -t 1 >build-static/serve.log 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || {
  echo "static_build: serve did not answer /health (build-static/serve.log)" >&2; exit 1; }
reply=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}')
echo "$reply" | grep -q '"text"' || { echo "static_build: bad completion: $reply" >&2; exit 1; }
echo "static_build: serve answered /health and /v1/completions"
