#!/usr/bin/env bash
# Builds the `fuzz` preset's fuzz targets and runs each for SECONDS (default 60), as many at once
# as there are cores (FUZZ_JOBS), seeded from ../shared. Prints executions and coverage per fuzzer.
# Fails if any found a crash, hang (-timeout), memory blow-up (-rss_limit_mb) or leak; the
# reproducer is left in build/fuzz/artifacts/ and the log in build/fuzz/logs/.
# Usage: scripts/fuzz.sh [SECONDS] [FUZZER...]   (default: every fuzz_* target)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
fuzzers=("$@")
[ ${#fuzzers[@]} -gt 0 ] || fuzzers=(fuzz_safetensors fuzz_config fuzz_gguf fuzz_tokenizer fuzz_tokenizer_text fuzz_jinja
                                     fuzz_openai_request)
build=build/fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${fuzzers[@]}"
python3 fuzz/make_seeds.py ../shared "$build/seeds"
mkdir -p "$build/artifacts" "$build/logs"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# One fuzzer per core at a time (each is one process); the summary keeps the list's order.
jobs=${FUZZ_JOBS:-$(nproc)}
run_one() {
  local f=$1 corpus="$build/corpus/$1" log="$build/logs/$1.log"  # corpus: inputs found so far; kept
  local dict=fuzz/json.dict  # every target but fuzz_jinja and fuzz_gguf reads JSON or text that JSON tokens help with
  [ "$f" = fuzz_jinja ] && dict=fuzz/fuzz_jinja.dict
  [ "$f" = fuzz_gguf ] && dict=fuzz/fuzz_gguf.dict
  mkdir -p "$corpus" "$build/seeds/$f"
  rm -f "$log.failed"
  "$build/fuzz/$f" -dict="$dict" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$build/artifacts/$f-" \
    "$corpus" "$build/seeds/$f" >"$log" 2>&1 || touch "$log.failed"
}
for f in "${fuzzers[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  echo "== $f: ${seconds}s"
  run_one "$f" &
done
wait

summary=() failed=()
for f in "${fuzzers[@]}"; do
  log="$build/logs/$f.log"
  status=ok
  [ -e "$log.failed" ] && status=FAILED && failed+=("$f")
  # The last status line ("#N DONE cov: C ft: F ...") and the final stats hold the numbers.
  # A fuzzer that crashed on a seed printed none of these: `|| true` keeps the summary (and the crash) coming.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  summary+=("$(printf '%-22s %6ss %10s execs  cov %6s  ft %6s  %s' "$f" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$status")")
done
for f in "${failed[@]}"; do
  grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$build/logs/$f.log" | head -20 || true
done
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed; logs: $build/logs/" >&2
  exit 1
fi
