#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, issue 17) in build-fuzz (clang-14, ASan + UBSan,
# -DXDINO_FUZZ=ON) and runs each target, or the ones named, for RUNS executions (default 10^6)
# or MAX_TIME seconds (default 1800), whichever ends first, from its seed corpus
# fuzz/corpus/<target>/. New inputs go to a scratch corpus under build-fuzz (the seeds in the
# tree stay small); crashes to build-fuzz/artifacts/<target>/. Prints libFuzzer's last status
# line (execs, cov:, ft:, rss) per target.
# MAX_LEN sets libFuzzer's -max_len (its default, 4096 bytes here, cannot grow an input as
# deep as a 10^6-level pickle); with it, the long and deep seeds of fuzz/make_deep_seeds.py
# (generated into build-fuzz/seeds, up to 1 MiB each) join the corpora of json, pth, pth_zip.
#   scripts/fuzz.sh                 # every target
#   RUNS=100000 scripts/fuzz.sh json pth
#   MAX_LEN=1048576 TIMEOUT=5 MAX_TIME=600 scripts/fuzz.sh json pth_zip pth   # TIMEOUT: -timeout, s
# Runs one fuzzer at a time, niced, ninja -j1: the CI machines have 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-1000000}
MAX_TIME=${MAX_TIME:-1800}
BUILD=${BUILD:-build-fuzz}
ALL=(json pth_zip pth safetensors tensorboard idx decode decode_float h5 features patch_tokens flags normalization warm_start)
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 nice -n 15 cmake -S . -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXDINO_FUZZ=ON >/dev/null
fi
nice -n 15 ninja -C "$BUILD" -j1 "${TARGETS[@]/#/fuzz_}" >"$BUILD/build.log" 2>&1 || {
  grep -E "error|FAILED|undefined" "$BUILD/build.log" | head -20
  echo "fuzz: the build of the targets failed; the whole log: $BUILD/build.log" >&2
  exit 1
}

# The targets write each input to a temporary file: keep those in memory where /dev/shm exists
# (a disk stalled by other work once turned an unlink into a 1 s timeout).
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi

extra=()
if [ -n "${MAX_LEN:-}" ]; then
  python3 fuzz/make_deep_seeds.py "$BUILD/seeds"
  extra=(-max_len="$MAX_LEN")
fi

status=0
for t in "${TARGETS[@]}"; do
  seeds=()
  [ -n "${MAX_LEN:-}" ] && [ -d "$BUILD/seeds/$t" ] && seeds=("$BUILD/seeds/$t")
  work="$BUILD/corpus/$t" art="$BUILD/artifacts/$t" log="$BUILD/fuzz_$t.log"
  mkdir -p "$work" "$art"
  # ASan: a failed allocation (size beyond -rss_limit_mb / malloc_limit) is reported, not
  # returned as null; UBSan reports abort the run.
  ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=0:detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  nice -n 15 "$BUILD/fuzz/fuzz_$t" "$work" "fuzz/corpus/$t" "${seeds[@]}" "${extra[@]}" -runs="$RUNS" \
    -max_total_time="$MAX_TIME" -rss_limit_mb=1024 -timeout="${TIMEOUT:-1}" -print_final_stats=1 \
    -artifact_prefix="$art/" >"$log" 2>&1 || status=1
  echo "== fuzz_$t: $(grep -E '^#[0-9]+' "$log" | tail -1)"
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" | tr '\n' ' '
  echo
  if grep -qE 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:' "$log"; then
    echo "   FINDING: see $log and $art/"; status=1
  fi
done
exit $status
