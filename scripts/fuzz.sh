#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) in
# build-fuzz/ and runs each for FUZZ_SECONDS on its seed corpus
# (fuzz/corpus/<name>/) and dictionary (fuzz/dict/<name>.dict).
# Fails when any target finds something (libFuzzer's exit status); the input
# is saved in build-fuzz/findings/<name>/ and the log beside it. New inputs
# found on the way go to build-fuzz/corpus/<name>/ (not into the repository),
# so a later run starts where this one stopped.
#
#   FUZZ_SECONDS=60              seconds per target
#   FUZZ_RUNS=10000000           also stop a target after this many executions
#   FUZZ_TARGETS="path config"   only these (default: every fuzz/*.cc target)
#   FUZZ_PARALLEL=1              targets run at once (each on one core)
#   FUZZ_JOBS=2                  build parallelism
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
parallel=${FUZZ_PARALLEL:-1}
build=build-fuzz
jobs=${FUZZ_JOBS:-$(nproc)}

if [ -z "${FUZZ_TARGETS:-}" ]; then
  FUZZ_TARGETS=$(for f in fuzz/*.cc; do basename "$f" .cc; done)
fi

cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSLUICE_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target fuzzers

# One target; its status is libFuzzer's (non-zero on a crash, a leak, a
# sanitizer report, a FUZZ_CHECK, a timeout or running out of memory).
run_one() {
  local name=$1 log="$build/findings/$1.log"
  mkdir -p "$build/corpus/$name" "$build/findings/$name"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$build/findings/$name/")
  [ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
  [ -f "fuzz/dict/$name.dict" ] && args+=(-dict="fuzz/dict/$name.dict")
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/fuzz_$name" "${args[@]}" "$build/corpus/$name" "fuzz/corpus/$name" \
    >"$log" 2>&1; then
    # The last status line: executions, coverage (cov: edges, ft: features), corpus.
    echo "fuzz: $name ok: $(grep -E '^#[0-9]+' "$log" | tail -1 | tr -s ' \t' ' ')"
  else
    echo "fuzz: $name FAILED (input in $build/findings/$name/, log $log)"
    grep -E "ERROR|property violated|runtime error|SUMMARY" "$log" | head -5 || true
    return 1
  fi
}

failed=()
running=()
# Waits for the oldest running target and records whether it failed.
reap() {
  local pid=${running[0]%%:*} name=${running[0]#*:}
  running=("${running[@]:1}")
  wait "$pid" || failed+=("$name")
}
echo "fuzz: ${seconds}s per target, $parallel at a time"
for name in $FUZZ_TARGETS; do
  [ "${#running[@]}" -ge "$parallel" ] && reap
  run_one "$name" &
  running+=("$!:$name")
done
while [ "${#running[@]}" -gt 0 ]; do reap; done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}"
  exit 1
fi
echo "fuzz: every target ran without a finding"
