#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) in
# build-fuzz/ and runs each for FUZZ_SECONDS, one after another, on its seed
# corpus (fuzz/corpus/<name>/) and dictionary (fuzz/dict/<name>.dict).
# Fails when any target finds something (libFuzzer's exit status); the input
# is saved in build-fuzz/findings/<name>/. New inputs found on the way go to
# build-fuzz/corpus/<name>/ (not into the repository).
#
#   FUZZ_SECONDS=60   seconds per target
#   FUZZ_TARGETS="path config"   only these (default: every fuzz/*.cc target)
#   FUZZ_JOBS=2       build parallelism
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
build=build-fuzz
jobs=${FUZZ_JOBS:-$(nproc)}

if [ -z "${FUZZ_TARGETS:-}" ]; then
  FUZZ_TARGETS=$(for f in fuzz/*.cc; do basename "$f" .cc; done)
fi

cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSLUICE_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target fuzzers

failed=()
for name in $FUZZ_TARGETS; do
  mkdir -p "$build/corpus/$name" "$build/findings/$name"
  dict=()
  [ -f "fuzz/dict/$name.dict" ] && dict=(-dict="fuzz/dict/$name.dict")
  echo "fuzz: $name for ${seconds}s"
  # -timeout: one input taking 10 s is a finding (a hang); leaks are findings too.
  if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
      "${dict[@]}" -artifact_prefix="$build/findings/$name/" \
      "$build/corpus/$name" "fuzz/corpus/$name" >"$build/findings/$name.log" 2>&1; then
    failed+=("$name")
    echo "fuzz: $name FAILED (input in $build/findings/$name/, log in $build/findings/$name.log)"
    grep -E "ERROR|property violated|runtime error" "$build/findings/$name.log" | head -5 || true
  else
    grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::average_exec_per_sec" \
      "$build/findings/$name.log" | tr '\n' ' ' | sed 's/$/\n/' || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}"
  exit 1
fi
echo "fuzz: every target ran ${seconds}s without a finding"
