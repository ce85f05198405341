#!/usr/bin/env bash
# Debian packages for the Makefile's targets, with one line of output per step and apt-get's
# own output kept in a log, whose last lines are printed if a step fails.
#
#   tools/debian_packages.sh install LOG PACKAGE...
#       Installs those of the packages that are not installed (make deps, make sanitizer-deps).
#       Nothing missing: prints nothing. As root: one line, e.g. "installing 3 Debian packages:
#       clang libclang-rt-dev libomp-dev (log: build/apt.log)", then apt-get update and apt-get
#       install, non-interactive. As another user: the apt-get line to run as root, exit 1.
#   tools/debian_packages.sh unpack DIR LOG PACKAGE...
#       Downloads the packages' .deb files into DIR/debs (no root needed) and unpacks their
#       files into DIR/root (make gpu-deps: a GPU machine without Debian's packages builds
#       against DIR/root/usr).
#
# apt-get's output is appended to LOG (its folder is made), each step under a line saying what
# ran; a failing step prints "'apt-get ...' failed (exit status N); the last lines of LOG:", those
# lines and the log's path, and exits with a non-zero status. apt-get waits up to 5 minutes for
# another package manager to release the dpkg lock instead of failing at once.
set -euo pipefail

LOCK_WAIT=300  # seconds apt-get waits for the dpkg lock
TAIL_LINES=20  # of the log, printed when a step fails

usage() {
  echo "usage: $0 install LOG PACKAGE... | $0 unpack DIR LOG PACKAGE..." >&2
  exit 2
}

# run_logged COMMAND...: runs the command, its output appended to $log; on failure prints the
# log's last lines and exits with the command's status.
run_logged() {
  local status=0
  echo "== $(date '+%F %T'): $*" >>"$log"
  "$@" >>"$log" 2>&1 </dev/null || status=$?
  if [[ $status -ne 0 ]]; then
    echo "'$*' failed (exit status $status); the last lines of $log:" >&2
    tail -n "$TAIL_LINES" "$log" | sed 's/^/  /' >&2
    echo "(apt-get's whole output: $log)" >&2
    exit "$status"
  fi
}

plural() { if [[ $1 -eq 1 ]]; then echo package; else echo packages; fi; }

start_log() {
  mkdir -p "$(dirname "$log")"
  touch "$log"
}

install_missing() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "Missing Debian packages. Please run as root (with sudo, or after su -):"
    echo "  apt-get update && apt-get install -y ${missing[*]}"
    exit 1
  fi
  start_log
  echo "installing ${#missing[@]} Debian $(plural ${#missing[@]}): ${missing[*]} (log: $log)"
  export DEBIAN_FRONTEND=noninteractive
  run_logged apt-get -o DPkg::Lock::Timeout="$LOCK_WAIT" update
  run_logged apt-get -o DPkg::Lock::Timeout="$LOCK_WAIT" install -y --no-install-recommends "${missing[@]}"
}

unpack() {
  local dir=$1 deb
  shift
  start_log
  rm -rf "$dir/debs"
  mkdir -p "$dir/debs" "$dir/root"
  echo "downloading $# Debian $(plural $#): $* (log: $log)"
  # apt-get download writes into the working folder.
  (cd "$dir/debs" && run_logged apt-get download "$@")
  for deb in "$dir"/debs/*.deb; do run_logged dpkg -x "$deb" "$dir/root"; done
  echo "unpacked into $dir/root: $*"
}

[[ $# -ge 1 ]] || usage
case $1 in
  install)
    [[ $# -ge 3 ]] || usage
    log=$(realpath -m "$2")
    shift 2
    install_missing "$@"
    ;;
  unpack)
    [[ $# -ge 4 ]] || usage
    log=$(realpath -m "$3")
    dir=$(realpath -m "$2")
    shift 3
    unpack "$dir" "$@"
    ;;
  *) usage ;;
esac
