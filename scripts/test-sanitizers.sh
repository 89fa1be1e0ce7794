#!/usr/bin/env bash
# The unit tests under ASan + UBSan, then a short run of every fuzzer, from one clang tree (the
# `fuzz` preset instruments the libraries for both). Tests labelled `slow` are left to the release
# run: under the sanitizers they cost minutes and exercise no parser that the rest do not. So are
# those labelled `server` (node clients and chromium driving the ember binary): they repeat what
# server_test checks in-process.
# Usage: scripts/test-sanitizers.sh [FUZZ_SECONDS]   (default: 10 per fuzzer, to fit CI's time)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh fuzz
echo "[test-sanitizers.sh] build took $SECONDS s"
# ASAN_OPTIONS come from the test preset: leaks are errors, and a request the allocator cannot meet
# returns null (throws std::bad_alloc) as without the sanitizer, so "too little memory" is testable.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --preset fuzz -j2 -LE "^(slow|server)$"
echo "[test-sanitizers.sh] build and ctest took $SECONDS s"
scripts/fuzz.sh "${1:-10}"
