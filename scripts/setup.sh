#!/usr/bin/env bash
# Installs the Debian packages that building and testing shrike need (prometheus for promtool,
# which tests/server's multi_model_test runs on /metrics). Idempotent, and quick when
# everything is already there (no apt-get at all then).
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
          nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libcpp-httplib-dev curl
          libopenblas-dev prometheus python3
          clang libclang-rt-14-dev)  # scripts/fuzz.sh: clang with libFuzzer and its sanitizers
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm packages of two tests, each pinned by its package-lock.json: the official openai client
# (tests/server) and Ajv, an independent JSON-schema validator (tests/engine's structured outputs).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for pkg in tests/server/openai_client:openai tests/constrain/schema_validator:ajv-formats; do
  dir="$root/${pkg%%:*}"
  [ -f "$dir/node_modules/${pkg##*:}/package.json" ] && continue
  if ! command -v npm >/dev/null 2>&1; then
    # These machines come with Node.js 20; elsewhere Debian's own Node.js (18) and npm will do.
    echo "setup: installing nodejs npm"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  if command -v npm >/dev/null 2>&1; then
    echo "setup: npm ci in ${pkg%%:*}"
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  else
    echo "setup: npm not found; the tests using ${pkg%%:*} fail until Node.js 20+ is installed" >&2
  fi
done
