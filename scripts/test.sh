#!/usr/bin/env bash
# Installs dependencies, builds the release preset and runs every test; then the unit tests under
# ASan + UBSan and a short run of each fuzzer (scripts/test-sanitizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
# The official openai npm client used by the server tests (from the npm registry).
tests/server/node/setup.sh
ctest --preset release -j2
scripts/test-sanitizers.sh
