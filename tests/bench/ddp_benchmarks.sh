#!/usr/bin/env bash
# Chapter 4's benchmarks, each a ratio measured in this run (make bench-ddp runs this):
#   1. scaling: samples/s of `mpirun -n 2 ./chapter4 --threads 1` over `mpirun -n 1` with 1 thread;
#   2. DDP's bucketed all-reduce vs one raw MPI_Allreduce of the same bytes, and
#   3. backward with and without communication (tests/bench/mpi_ddp_sync.cpp).
# Usage: tests/bench/ddp_benchmarks.sh [BUILD_DIR] [STEPS]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-300}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# samples_per_s from a chapter 4 RESULT line.
rate() { sed -n 's/^RESULT .*samples_per_s=\([0-9.e+]*\) .*/\1/p'; }
ARGS=(--threads 1 --epochs 1 --max-steps "$STEPS")
one=$(mpirun -n 1 "$BUILD/chapter4" "${ARGS[@]}" | rate)
two=$(mpirun -n 2 "$BUILD/chapter4" "${ARGS[@]}" | rate)
echo "BENCH scaling steps=$STEPS one_rank_samples_per_s=$one two_ranks_samples_per_s=$two ratio=$(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.3f", a / b }')"
mpirun -n 2 "$BUILD/tests/mpi_ddp_sync"
