#!/usr/bin/env bash
# ring_cost_model.sh: chapter 4's DDP step time on two "nodes" joined by a rate-limited link,
# against bucket size, beside an alpha-beta cost model of ring all-reduce (chapter 6). A
# benchmark, not a test: it prints a markdown table and asserts nothing about the times.
#
# Usage (as root: it makes network namespaces and tc qdiscs, and removes them at the end):
#   tests/bench/ring_cost_model.sh [BUILD_DIR] [RATE] [STEPS] [REPS]
#   defaults: build 1gbit 60 2; needs BUILD_DIR/chapter4 and BUILD_DIR/tests/ring_cost_model
#   (cmake --build BUILD_DIR --target chapter4 ring_cost_model)
#
# The setup is tests/multinode/netns_lab.sh's: two network namespaces ("nodes") with one rank
# each, joined by a bridge, the ranks talking TCP only; here every node's eth0 sends at most
# RATE (tc tbf, bucket of 32 KiB, so that a gradient bucket cannot slip through as one burst).
#
# The model. All-reducing b bytes over n ranks with a ring costs
#     t(b) = alpha + 2(n-1)/n * b / B
# every rank sends (and receives) 2(n-1)/n of the buffer: n-1 steps of reduce-scatter and n-1 of
# all-gather, each moving b/n. For n = 2 Open MPI may pick recursive doubling instead of the
# ring; it moves the same b per rank, so the formula holds. alpha is the fixed cost of one
# all-reduce (software, system calls, wake-ups, the wire's latency), B the bandwidth it gets.
# DDP all-reduces each bucket separately, so a step with buckets b_1..b_k pays
#     T_comm = sum over buckets of alpha(b_i) + 2(n-1)/n * (b_1 + ... + b_k) / B.
# Both numbers are measured here, on the same link, by tests/bench/ring_cost_model.cpp (raw
# MPI_Allreduce): B comes from the slope of a least-squares line through the times of 256 KiB
# to 4 MiB, and alpha has two values, because Open MPI's TCP transport has two protocols:
#   alpha_eager: the time of a 4-byte all-reduce, paid by buckets under 64 KiB (the TCP btl's
#                eager limit: the data goes out at once);
#   alpha_rndv:  the line's intercept, paid by buckets of 64 KiB or more (rendezvous: a
#                handshake first, then the data in fragments; on a shaped link it also pays
#                for ACKs queued behind the other direction's data in the same token bucket).
# B is printed beside RATE: TCP over a shaped link gets somewhat less than the nominal rate.
#
# Overlap with backward. DDP starts a bucket's all-reduce as soon as its last gradient is
# ready, while backward goes on with earlier layers, so only part of T_comm lengthens the step.
# The script measures the compute-only step time T_c with the same program on one rank (same
# thread count, DDP still copying gradients into its buckets, the all-reduce of one rank being a
# copy) and gives two predictions that bracket the truth:
#   no overlap:      T_c + T_comm                      (every all-reduce waited for in full)
#   full overlap:    T_c + t(b_k)  (only the last bucket, whose gradients
#                    come last in backward, is exposed; all earlier ones hide behind backward)
# The measured step lies between them as far as backward after bucket i is ready outlasts the
# all-reduces queued before it. "exposed" = measured - T_c is the communication the step paid.
#
# Assumptions and limits: the ranks' compute is as fast with two ranks as with one (on this
# machine both nodes share the same cores, and the kernel's TCP work runs on them too); the
# all-reduces of a step do not overlap each other (the process group runs them one after the
# other on its worker thread); times are medians over steps 6..STEPS of rank 0 (--metrics), the
# lowest median over REPS runs. Chapter 4's CNN has 0.86 MiB of gradients in 8 parameters, so
# bucket caps give 1 to 7 buckets; a parameter is never split between buckets.
set -euo pipefail

BUILD=${1:-build}
RATE=${2:-1gbit}
STEPS=${3:-60}
REPS=${4:-2}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "ring_cost_model.sh: no build folder '${1:-build}'" >&2; exit 2; }
for program in "$BUILD/chapter4" "$BUILD/tests/ring_cost_model"; do
  [[ -x $program ]] || { echo "ring_cost_model.sh: $program is missing (cmake --build $BUILD --target chapter4 ring_cost_model)" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LAB_MPIRUN=${MPIRUN:-/usr/bin/mpirun}
# shellcheck source=../multinode/netns_lab.sh
source "$HERE/../multinode/netns_lab.sh"
lab_can_run
command -v tc >/dev/null || { echo "ring_cost_model.sh: the 'tc' command is missing (apt-get install iproute2)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-ring-cost.XXXXXX")
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  lab_down
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command, failing with its output if it fails.
run() {
  local log=$WORK/run.log
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "ring_cost_model.sh: failed: $*" >&2
    exit 1
  fi
  cat "$log"
}

# The median step time, in seconds, of a --metrics CSV (steps 6 and later).
median_step() { awk -F, 'NR > 6 { print $4 }' "$1" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

lab_up 2
lab_shape "$RATE"
TRAIN=(--device cpu --threads 1 --max-steps "$STEPS")

# 1. The link: alpha and B from raw all-reduces.
lab_mpirun_command 2
run "${LAB_CMD[@]}" "$BUILD/tests/ring_cost_model" 20 >"$WORK/probe.txt"
read -r ALPHA ALPHA_RNDV BANDWIDTH < <(awk -F'[ =]' '
  { bytes = $3; seconds = $5 }
  bytes == 4 { alpha = seconds }
  bytes >= 262144 { n++; sx += bytes; sy += seconds; sxx += bytes * bytes; sxy += bytes * seconds }
  END { slope = (n * sxy - sx * sy) / (n * sxx - sx * sx); print alpha, (sy - slope * sx) / n, 1 / slope }' "$WORK/probe.txt")

# 2. Compute alone: one rank, in node 1.
lab_mpirun_command 1
compute=""
for ((r = 1; r <= REPS; r++)); do
  run "${LAB_CMD[@]}" "$BUILD/chapter4" "${TRAIN[@]}" --metrics "$WORK/one.csv" >/dev/null
  t=$(median_step "$WORK/one.csv")
  compute=$(awk -v a="${compute:-$t}" -v b="$t" 'BEGIN { print (a < b ? a : b) }')
done

# 3. Two nodes, at each bucket setting (first cap, then the others' cap, MiB). The runs of a
# setting alternate with the others', so that a slow spell of the machine hits them all alike.
SETTINGS=("1 25" "0.001 25" "0.05 0.05" "0.0001 0.0001")
lab_mpirun_command 2
declare -A best buckets
for ((r = 1; r <= REPS; r++)); do
  for setting in "${SETTINGS[@]}"; do
    read -r first cap <<<"$setting"
    out=$(run "${LAB_CMD[@]}" "$BUILD/chapter4" "${TRAIN[@]}" --first-bucket-cap-mb "$first" --bucket-cap-mb "$cap" \
      --metrics "$WORK/two.csv")
    buckets[$setting]=$(sed -n 's/^bucket [0-9]*: *\([0-9.]*\) MiB.*/\1/p' <<<"$out" | paste -sd' ')
    t=$(median_step "$WORK/two.csv")
    best[$setting]=$(awk -v a="${best[$setting]:-$t}" -v b="$t" 'BEGIN { print (a < b ? a : b) }')
  done
done

# 4. The table.
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "## DDP step time against bucket size: chapter 4's CNN on 2 nodes (1 rank each), link $RATE"
echo
echo "- machine: $cpu, $(nproc) cores (shared by both nodes), Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "- link: tc tbf rate $RATE burst 32kb on each node's eth0, Open MPI TCP (btl tcp,self), n = 2 ranks"
echo "- command: tests/bench/ring_cost_model.sh $BUILD $RATE $STEPS $REPS; each run: chapter4 ${TRAIN[*]} --first-bucket-cap-mb F --bucket-cap-mb C --metrics FILE"
awk -v a="$ALPHA" -v r="$ALPHA_RNDV" -v b="$BANDWIDTH" -v c="$compute" 'BEGIN {
  printf "- measured: alpha_eager = %.1f us (4-byte MPI_Allreduce), alpha_rndv = %.2f ms and B = %.0f Mbit/s (line through MPI_Allreduce times of 256 KiB to 4 MiB), compute-only step T_c = %.1f ms (1 rank)\n", a * 1e6, r * 1e3, b * 8 / 1e6, c * 1e3 }'
echo "- raw MPI_Allreduce medians: $(awk -F'[ =]' '{ printf "%s%s B %.3f ms", (NR > 1 ? ", " : ""), $3, $5 * 1e3 }' "$WORK/probe.txt")"
echo
echo "| first / other cap (MiB) | buckets (MiB, in all-reduce order) | k | model T_comm (ms) | predicted, no overlap (ms) | predicted, full overlap (ms) | measured step (ms) | measured - T_c (ms) |"
echo "|---|---|---|---|---|---|---|---|"
for setting in "${SETTINGS[@]}"; do
  awk -v setting="$setting" -v sizes="${buckets[$setting]}" -v a="$ALPHA" -v r="$ALPHA_RNDV" -v bw="$BANDWIDTH" \
      -v c="$compute" -v measured="${best[$setting]}" 'BEGIN {
    n = 2; f = 2 * (n - 1) / n
    k = split(sizes, s, " ")
    comm = 0
    for (i = 1; i <= k; i++) {
      bytes = s[i] * 1048576
      t = (bytes < 65536 ? a : r) + f * bytes / bw
      comm += t
    }
    last = t
    split(setting, caps, " ")
    gsub(/ /, ", ", sizes)
    printf "| %s / %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f |\n", caps[1], caps[2], sizes, k, comm * 1e3,
           (c + comm) * 1e3, (c + last) * 1e3, measured * 1e3, (measured - c) * 1e3 }'
done
