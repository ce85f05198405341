#!/usr/bin/env bash
# on_two_nodes.sh MPIRUN PROGRAM [ARGS...]: runs the MPI program with one rank on each of two
# "nodes", network namespaces joined by a bridge (netns_lab.sh), the ranks talking TCP only,
# and prints the job's output. `make results` runs its two-node row through this.
#
# Exits with the job's status; 77 where network namespaces cannot be made (not root, no `ip`).
# The job may take LOCKSTEP_MULTINODE_TIMEOUT seconds (default 3600), but it must start within
# 60: Open MPI's daemon on the second node has been seen not to come up about once in five
# starts, and then nothing is printed at all. A job that prints no line in 60 s is stopped and
# started once more. The job's output is printed when it ends. Removes the lab on every exit.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 MPIRUN PROGRAM [ARGS...]   (e.g. $0 mpirun ./chapter6 --norm batch)" >&2
  exit 2
fi
LAB_MPIRUN=$1
shift
LIMIT=${LOCKSTEP_MULTINODE_TIMEOUT:-3600}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=netns_lab.sh
source "$HERE/netns_lab.sh"

[[ -x $1 ]] || { echo "on_two_nodes.sh: '$1' is not an executable program (build it first)" >&2; exit 2; }
lab_can_run
START_LIMIT=60
LOG=$(mktemp "${TMPDIR:-/tmp}/lockstep-on-two-nodes.XXXXXX")
JOB=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -n $JOB ]]; then kill -TERM "$JOB" 2>/dev/null && wait "$JOB" 2>/dev/null || true; fi
  lab_down
  rm -f "$LOG"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

lab_up 2
lab_mpirun_command 2
status=0
for attempt in 1 2; do
  timeout -k 5 "$LIMIT" "${LAB_CMD[@]}" "$@" >"$LOG" 2>&1 &
  JOB=$!
  # Wait for the job's first line (or its end).
  for ((tenths = 0; tenths < 10 * START_LIMIT; tenths++)); do
    [[ -s $LOG ]] || ! kill -0 "$JOB" 2>/dev/null && break
    sleep 0.1
  done
  if [[ -s $LOG ]] || ! kill -0 "$JOB" 2>/dev/null || [[ $attempt -eq 2 ]]; then
    status=0
    wait "$JOB" || status=$?
    JOB=""
    break
  fi
  echo "on_two_nodes.sh: the job printed nothing in $START_LIMIT s (its daemon on node 2 did not start?); starting it again" >&2
  kill -TERM "$JOB" 2>/dev/null || true
  wait "$JOB" 2>/dev/null || true
  JOB=""
done
cat "$LOG"
exit "$status"
