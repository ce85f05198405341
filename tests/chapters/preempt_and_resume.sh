#!/usr/bin/env bash
# Preemption that saves (chapters/common/preemption.h), as a batch system does it, mid-run:
#   1. the whole run: checksum A;
#   2. the same run, signalled once it has trained two steps: every rank must stop after the
#      same step with exit status 75, rank 0 printing the command that resumes;
#   3. that command, run as printed (with this test's mpirun): checksum A again.
# With RESUME=no (chapters 4 and 5, which keep no checkpoint) only step 2, without --checkpoint.
# SIGNAL says how the signal comes:
#   usr1-mpirun   SIGUSR1 to mpirun, which forwards it to every rank (sbatch --signal=B:USR1@90)
#   term-ranks    SIGTERM to every rank at once (what Slurm does when it preempts a job)
# (A second signal ending a rank at once is a unit test: StopSignals.ASecondSignalEndsTheProcessAtOnce.)
# Usage: preempt_and_resume.sh MPIRUN PROGRAM DIR SIGNAL RESUME(yes|no) FLAGS...
set -uo pipefail
mpirun=$1 program=$2 dir=$3 signal=$4 resume=$5
shift 5
flags=("$@")
work=$(mktemp -d "$dir/preempt.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
checksum_of() { sed -n 's/^RESULT .* checksum=\([0-9a-f]*\).*/\1/p' "$1"; }

# Every process below `pid` whose command is the program (mpirun's children, or deeper).
ranks_of() {
  local pid=$1 child
  for child in $(ps -o pid= --ppid "$pid"); do
    [ "$(ps -o comm= -p "$child")" = "$(basename "$program" | cut -c1-15)" ] && echo "$child"
    ranks_of "$child"
  done
}

if [ "$resume" = yes ]; then
  "$mpirun" -n 2 "$program" "${flags[@]}" >"$work/whole.txt" 2>&1 || { cat "$work/whole.txt"; fail "the whole run failed"; }
  want=$(checksum_of "$work/whole.txt")
  [ -n "$want" ] || fail "the whole run printed no checksum"
fi

saving=()
[ "$resume" = yes ] && saving=(--checkpoint "$work/checkpoint.safetensors")
"$mpirun" -n 2 "$program" "${flags[@]}" "${saving[@]}" --metrics "$work/steps.csv" >"$work/stopped.txt" 2>&1 &
job=$!
# The metrics file has a header and one row per step: wait for two steps.
until [ "$(wc -l <"$work/steps.csv" 2>/dev/null || echo 0)" -ge 3 ]; do
  kill -0 "$job" 2>/dev/null || { cat "$work/stopped.txt"; fail "the job ended before its second step"; }
  sleep 0.05
done
case $signal in
  usr1-mpirun) kill -USR1 "$job" ;;
  term-ranks) kill -TERM $(ranks_of "$job") ;;
  *) fail "unknown SIGNAL $signal" ;;
esac
wait "$job"
status=$?
cat "$work/stopped.txt"
[ "$status" -eq 75 ] || fail "the signalled job ended with status $status, expected 75 (preempted)"
grep -q "^preempted (SIG[A-Z0-9]*): every rank stopped after step [0-9]*" "$work/stopped.txt" ||
  fail "rank 0 did not say where the job stopped"
[ "$resume" = yes ] || exit 0

command=$(grep -A1 "Resume with:" "$work/stopped.txt" | tail -n 1 | sed 's/^ *//')
case $command in
  "mpirun -n 2 $program "*"--resume $work/checkpoint.safetensors") ;;
  *) fail "no resume command ending in --resume $work/checkpoint.safetensors: '$command'" ;;
esac
# As printed, with this test's mpirun in place of the one on the PATH.
eval "\"$mpirun\" ${command#mpirun }" >"$work/resumed.txt" 2>&1 || { cat "$work/resumed.txt"; fail "the resumed job failed"; }
cat "$work/resumed.txt"
got=$(checksum_of "$work/resumed.txt")
echo "whole run: checksum $want; stopped by $signal and resumed: checksum $got"
[ "$got" = "$want" ] || fail "the resumed run ended with other weights than the whole run"
