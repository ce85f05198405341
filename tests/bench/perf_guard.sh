#!/usr/bin/env bash
# make perf-guard (a step of .ci/run): a few speeds measured in this run, each against a floor far
# below what it measures but above what a real regression gives. A speed nobody measures
# regresses unseen: bf16 once lost half its speed to a ReLU loop, and nothing noticed.
#
#   1. bf16 over f32 on chapter 2's CNN (chapter5 --amp bf16 / --amp off, 1 thread): at least
#      BF16_FLOOR, where the CPU's bf16 peak (AMX or vdpbf16ps) is at least 1.5 times its f32 peak;
#   2. 2 ranks over 1 rank (mpirun -n 2 / -n 1 chapter4 --threads 1, the CNN): at least
#      SCALING_FLOOR, where the machine has 2 cores (it measures 1.5 to 1.9 on the shared 2-core
#      machines; ranks that stopped overlapping or ran in turn would give 1.0 to 1.2);
#   3. each chapter's samples/s on the MLP against its committed baseline (BASELINE, measured on
#      the machine it names): at least half of it.
#
# Runs of a ratio alternate, ROUNDS rounds, and the medians are compared. The table is printed
# every run; the exit status is 1 if any check fails, naming it. No check is a test of make test:
# the machine's load could fail them there, while .ci/run has the machine to itself.
# Usage: tests/bench/perf_guard.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-3}
BF16_FLOOR=${BF16_FLOOR:-1.25}
SCALING_FLOOR=${SCALING_FLOOR:-1.4}
BASELINE=${BASELINE:-$HERE/perf_baseline.txt}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck source=result_fields.sh
source "$HERE/result_fields.sh"

for program in chapter2 chapter3 chapter4 chapter5 chapter6 tests/peak_flops; do
  [ -x "$BUILD/$program" ] || { echo "perf-guard: $BUILD/$program is not built (run make build first)" >&2; exit 1; }
done

failed=()
row() {  # row CHECK MEASURED FLOOR: prints the row, remembers a failure
  local verdict=ok
  if ! awk -v m="$2" -v f="$3" 'BEGIN { exit !(m >= f) }'; then verdict=FAILED; failed+=("$1"); fi
  printf "%-44s %12s %12s  %s\n" "$1" "$2" "$3" "$verdict"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# The median samples_per_s of ROUNDS runs of each of two commands, alternated: "A B".
alternate() {  # alternate "COMMAND A" "COMMAND B"
  local a="" b=""
  for _ in $(seq "$ROUNDS"); do
    a+="$(eval "$1" | field samples_per_s) "
    b+="$(eval "$2" | field samples_per_s) "
  done
  echo "$(echo "$a" | tr ' ' '\n' | grep . | median) $(echo "$b" | tr ' ' '\n' | grep . | median)"
}

peaks=$("$BUILD/tests/peak_flops" 0.02 | grep '^RESULT')
f32_peak=$(echo "$peaks" | sed -n 's/.* f32_1=\([0-9.]*\).*/\1/p')
bf16_peak=$(echo "$peaks" | awk '{ for (i = 1; i <= NF; ++i) if ($i ~ /^(bf16|amx)_1=/) { split($i, kv, "="); if (kv[2] > m) m = kv[2] } } END { print m + 0 }')
echo "perf-guard on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; one core's peak: f32 $f32_peak GFLOP/s, bf16 $bf16_peak"
printf "%-44s %12s %12s  %s\n" check measured floor result

# 1. bf16 over f32: 300 steps, where 100 moved the ratio by a fifth between runs.
cnn=(--device cpu --model cnn --threads 1 --epochs 1 --max-steps 300)
if awk -v b="$bf16_peak" -v f="$f32_peak" 'BEGIN { exit !(b >= 1.5 * f) }'; then
  read -r f32 bf16 < <(alternate "'$BUILD/chapter5' ${cnn[*]} --amp off" "'$BUILD/chapter5' ${cnn[*]} --amp bf16")
  row "bf16/f32, CNN, 1 thread ($bf16 / $f32)" "$(ratio "$bf16" "$f32")" "$BF16_FLOOR"
else
  echo "bf16/f32: skipped, this CPU's bf16 peak is not 1.5 times its f32 peak"
fi

# 2. Two ranks over one.
if [ "$(nproc)" -ge 2 ]; then
  ddp=(--device cpu --model cnn --threads 1 --epochs 1 --max-steps 200)
  read -r one two < <(alternate "mpirun -n 1 '$BUILD/chapter4' ${ddp[*]}" "mpirun -n 2 '$BUILD/chapter4' ${ddp[*]}")
  row "2 ranks / 1 rank, CNN ($two / $one)" "$(ratio "$two" "$one")" "$SCALING_FLOOR"
else
  echo "2 ranks / 1 rank: skipped, this machine has one core"
fi

# 3. Each chapter against its baseline: "chapterN samples_per_s" lines, '#' comments.
mlp=(--device cpu --model mlp --threads 1 --epochs 1 --max-steps 300)
while read -r program baseline; do
  case $program in '#'* | '') continue ;; esac
  case $program in chapter4 | chapter5 | chapter6) launcher="mpirun -n 1" ;; *) launcher="" ;; esac
  speed=$($launcher "$BUILD/$program" "${mlp[@]}" < /dev/null | field samples_per_s)
  row "$program MLP samples/s (baseline $baseline)" "$(printf '%.0f' "$speed")" "$(awk -v b="$baseline" 'BEGIN { printf "%.0f", b / 2 }')"
done < "$BASELINE"

if [ ${#failed[@]} -gt 0 ]; then
  echo "perf-guard: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "perf-guard: every check passed"
