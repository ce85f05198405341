#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets of fuzz/ with Clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, in the folder make sanitize builds in
# (tools/sanitizers/configure_asan.sh), then for each target
#   1. replays its seeds (fuzz/corpus/<target>/) and every crash found before
#      (fuzz/regressions/<target>/), so a bug that came back fails at once;
#   2. fuzzes it for SECONDS, starting from the seeds, with a limit on each input's time (a
#      hang) and memory (a runaway allocation).
# The targets run side by side, one per core (JOBS: how many at once).
# New interesting inputs go to BUILD_DIR/fuzz-corpus/<target>/ (the committed seeds stay as
# they are); a crash is written to BUILD_DIR/fuzz-artifacts/<target>/ and named at the end, with
# the command that replays it. Fix the bug, then keep the input as a regression:
#   cp BUILD_DIR/fuzz-artifacts/<target>/crash-... fuzz/regressions/<target>/<what-it-was>
#
#   tools/fuzz.sh [BUILD_DIR] [SECONDS] [TARGET...]   (defaults: build-asan, 60, every target)
set -euo pipefail
cd "$(dirname "$0")/.."

# The build folder as an absolute path: the fuzzers run from other folders.
build=$(realpath -m "${1:-build-asan}")
seconds=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
targets=${*:-idx cifar10 safetensors launch checkpoint}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
root=$PWD

tools/sanitizers/configure_asan.sh "$build"
# shellcheck disable=SC2046
cmake --build "$build" -j "$jobs" --target $(printf 'fuzz_%s ' $targets)

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The largest input each target is given: a few whole files' worth (a CIFAR-10 record is 3073
# bytes), small enough that each run stays quick.
max_len() {
  case "$1" in
    cifar10) echo 10000 ;;
    idx|safetensors|checkpoint) echo 4096 ;;
    *) echo 1024 ;;
  esac
}

# One target: replay, then fuzz. What it prints goes to its summary file; a target that fails
# leaves its name in failed/.
results=$build/fuzz-results
rm -rf "$results"
mkdir -p "$results/failed"
fuzz_one() {
  local target=$1
  local program=$build/fuzz/fuzz_$target
  local seeds=$root/fuzz/corpus/$target
  local regressions=$root/fuzz/regressions/$target
  local corpus=$build/fuzz-corpus/$target
  local artifacts=$build/fuzz-artifacts/$target
  mkdir -p "$corpus" "$artifacts"
  local dict=()
  [ -f "$root/fuzz/dicts/$target.dict" ] && dict=(-dict="$root/fuzz/dicts/$target.dict")

  echo "== fuzz_$target: replaying the seeds and regressions"
  local replay=("$seeds"/*)
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then replay+=("$regressions"/*); fi
  if ! "$program" "${replay[@]}" > "$artifacts/replay.log" 2>&1; then
    tail -n 40 "$artifacts/replay.log"
    echo "fuzz_$target: a seed or regression input fails again (log: $artifacts/replay.log)"
    touch "$results/failed/$target"
    return 0
  fi

  echo "== fuzz_$target: fuzzing for ${seconds}s"
  # -timeout: an input that takes longer is a hang; -rss_limit_mb and -malloc_limit_mb: one
  # that needs more memory is a runaway allocation (the readers bound theirs by the file).
  if ! "$program" "$corpus" "$seeds" "${dict[@]}" -max_total_time="$seconds" -max_len="$(max_len "$target")" \
      -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" > "$artifacts/fuzz.log" 2>&1; then
    tail -n 60 "$artifacts/fuzz.log"
    touch "$results/failed/$target"
  fi
  grep -E "^(stat::number_of_executed_units|stat::new_units_added|Done )" "$artifacts/fuzz.log" || true
}

# A fuzzer runs on one core: the targets run as many at a time as there are cores, and each
# one's summary is printed, in order, when all have finished.
running=0
for target in $targets; do
  fuzz_one "$target" > "$results/$target.txt" 2>&1 &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
failed=""
for target in $targets; do
  cat "$results/$target.txt"
  if [ -e "$results/failed/$target" ]; then failed="$failed $target"; fi
done

if [ -n "$failed" ]; then
  echo
  echo "Fuzzing found failures in:$failed. The inputs that fail are in $build/fuzz-artifacts/<target>/;"
  echo "replay one with: $build/fuzz/fuzz_<target> $build/fuzz-artifacts/<target>/crash-..."
  echo "then fix the bug and keep the input as fuzz/regressions/<target>/<a name saying what it was>."
  exit 1
fi
echo "Fuzzing found nothing: $targets (${seconds}s each)"
