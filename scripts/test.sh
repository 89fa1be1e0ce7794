#!/usr/bin/env bash
# Installs dependencies, builds the release preset and runs every test; then the unit tests under
# ASan + UBSan and a short run of each fuzzer (scripts/test-sanitizers.sh). Each step's time is
# printed as it ends (CI's budget is the sum).
set -euo pipefail
cd "$(dirname "$0")/.."
step() {
  local start=$SECONDS
  "$@"
  echo "[test.sh] $* took $((SECONDS - start)) s (total $SECONDS s)"
}
step scripts/install-deps.sh
step scripts/build.sh release
# The official openai npm client used by the server tests (from the npm registry).
step tests/server/node/setup.sh
step ctest --preset release -j2
step scripts/test-sanitizers.sh
