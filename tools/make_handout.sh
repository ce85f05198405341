#!/bin/sh
# Writes a student's copy of this repository into DEST: every file of the checkout (git's
# tracked files, or every file where there is no git) except what a teacher keeps: the
# exercises' reference solutions (chapters/*/exercises/*/solution.cpp) and the answer keys of
# the written exercises (course/answers/). The copy configures, builds and passes `make test`,
# where each exercise's test is skipped as "not yet solved" until the student's file passes it
# (chapters/exercises.cmake).
#
#   tools/make_handout.sh DEST        (make handout DEST=dir)
set -eu
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: make handout DEST=dir (a folder that does not exist yet, or is empty)" >&2
  exit 2
fi
dest=$1
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -e "$dest" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
  echo "make handout: $dest is not empty; name a new folder, so that nothing in it is overwritten" >&2
  exit 1
fi
mkdir -p "$dest"
# What the teacher keeps: a path matches if it is a solution or lies under course/answers/.
keep_out() { grep -v -E '^chapters/[^/]+/exercises/[^/]+/solution\.cpp$|^course/answers/'; }
cd "$root"
if [ "$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)" = "$root" ]; then
  git ls-files | keep_out > "$dest/.handout-files"
else
  find . -type f ! -path './build*' ! -path './.git/*' | sed 's|^\./||' | keep_out > "$dest/.handout-files"
fi
tar -cf - -T "$dest/.handout-files" | tar -xf - -C "$dest"
count=$(wc -l < "$dest/.handout-files")
rm "$dest/.handout-files"
left=$(cd "$dest" && find . -name solution.cpp -o -path ./course/answers -print | head -n 1)
if [ -n "$left" ]; then
  echo "make handout: $left was copied; the handout must hold no solution" >&2
  exit 1
fi
echo "make handout: wrote $count files to $dest, without the exercises' solutions and answer keys"
echo "  the student runs: make -C $dest test   (an exercise shows as skipped until it is solved)"
