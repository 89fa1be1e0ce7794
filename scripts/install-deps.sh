#!/usr/bin/env bash
# Installs the Debian 12 packages Ember needs to build and test. Safe to run again.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git python3
      nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev libcli11-dev
      libssl-dev zlib1g-dev libbrotli-dev libedit-dev
      json-schema-test-suite python3-jsonschema  # grammar tests: the suite's schemas, an independent validator
      googletest libgtest-dev libgmock-dev libbenchmark-dev
      libsimde-dev  # the AVX-512 kernel tests on machines without AVX-512 (tests/kernels)
      chromium
      nginx-light
      clang libclang-rt-14-dev)  # clang's libFuzzer and sanitizer runtimes: the `fuzz` preset
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Node.js and npm run the official openai client test; a machine may already have them from elsewhere.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
