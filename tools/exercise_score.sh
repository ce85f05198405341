#!/bin/sh
# Runs an exercise's test program and says how many of its test cases pass: the student's
# score (make grade), or, in a handout, whether the exercise is solved yet (its CTest test).
#
#   tools/exercise_score.sh grade  NAME COMMAND...   prints "NAME: score K/N (...)" last, or
#                                                    "score 0" for a program that crashed
#   tools/exercise_score.sh status NAME COMMAND...   exits 0 when every test case passes; else
#                                                    says "NAME: not yet solved (K of N ...)"
#                                                    and exits 77, CTest's "skipped"
#
# COMMAND is the exercise's test program (under mpirun for an MPI exercise). The counts come
# from gtest's summary lines, printed by rank 0 alone under mpirun:
#   [==========] N tests from M test suites ran.   and   [  PASSED  ] K tests.
set -u
if [ $# -lt 3 ] || { [ "$1" != grade ] && [ "$1" != status ]; }; then
  echo "usage: tools/exercise_score.sh grade|status NAME COMMAND..." >&2
  exit 2
fi
mode=$1 name=$2
shift 2
output=$("$@" --gtest_color=no 2>&1)
status=$?
printf '%s\n' "$output"
total=$(printf '%s\n' "$output" | sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' | head -n 1)
passed=$(printf '%s\n' "$output" | sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' | head -n 1)
if [ -z "$total" ] || [ -z "$passed" ]; then
  # No summary: the program crashed before its end.
  if [ "$mode" = grade ]; then
    echo "$name: score 0 (the test program ended, exit status $status, before gtest's summary)"
    exit 0
  fi
  echo "$name: not yet solved (the test program ended, exit status $status, before gtest's summary)"
  exit 77
fi
if [ "$mode" = grade ]; then
  echo "$name: score $passed/$total (test cases passed)"
  exit 0
fi
if [ "$passed" -eq "$total" ] && [ "$status" -eq 0 ]; then
  exit 0
fi
echo "$name: not yet solved ($passed of $total test cases pass); make exercise EX=$name shows why"
exit 77
