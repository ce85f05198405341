#!/usr/bin/env bash
# Lockstep beside PyTorch on the CPU, the table of the CPU-kernel work (make bench-torch runs
# this): the same model, data, batch and threads, each pair run alternately (which of the two
# goes first turns every round), ROUNDS times; the table lists every run's samples/s and the
# ratio of the medians. PyTorch is Debian's python3-torch through tests/reference/
# chapter2_torch.py (one process) and chapter4_torch.py (DDP over gloo, started by
# torch.multiprocessing); Lockstep is chapter2 and chapter4 (mpirun).
#
#   mlp, batch 128, 2 threads         chapter2 vs chapter2_torch.py
#   cnn, batch 64, 2 threads          chapter2 vs chapter2_torch.py
#   cnn, batch 64, 1 thread           chapter2 vs chapter2_torch.py
#   ddp 1 rank x 1 thread, cnn        mpirun -n 1 chapter4 vs chapter4_torch.py --world 1
#   ddp 2 ranks x 1 thread, cnn       mpirun -n 2 chapter4 vs chapter4_torch.py --world 2
# and the scaling from 1 to 2 ranks of each. Every run trains STEPS steps (per rank) of epoch 1;
# samples/s is what the program's RESULT line reports (training time only, all ranks).
#
# Usage: tests/bench/torch_benchmarks.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: build 3 300)
# TORCH_PYTHON (default /usr/bin/python3) and MPIRUN (default mpirun) override the launchers.
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
STEPS=${3:-300}
TORCH=${TORCH_PYTHON:-/usr/bin/python3}
MPIRUN=${MPIRUN:-mpirun}
HERE=$(cd "$(dirname "$0")" && pwd)
REF=$HERE/../reference

for program in chapter2 chapter4; do
  [ -x "$BUILD/$program" ] || { echo "torch_benchmarks.sh: $BUILD/$program is missing: build it first (make build)" >&2; exit 1; }
done
"$TORCH" -c "import torch" 2>/dev/null ||
  { echo "torch_benchmarks.sh: $TORCH cannot import torch (apt-get install python3-torch libopenblas0-pthread)" >&2; exit 1; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $STEPS =~ ^[1-9][0-9]*$ ]] ||
  { echo "torch_benchmarks.sh: ROUNDS and STEPS must be whole numbers of 1 or more, got '$ROUNDS' and '$STEPS'" >&2; exit 2; }

# field KEY and median (reading RESULT lines and runs' numbers).
# shellcheck source=result_fields.sh
source "$HERE/result_fields.sh"

# run SIDE WORKLOAD -> samples/s of one run (SIDE: lockstep or torch).
run() {
  local side=$1 workload=$2 out
  local mlp=(--model mlp --batch-size 128 --threads 2) cnn2=(--model cnn --batch-size 64 --threads 2)
  local cnn1=(--model cnn --batch-size 64 --threads 1) ddp=(--model cnn --batch-size 64 --threads 1)
  local steps=(--epochs 1 --max-steps "$STEPS")
  case $side/$workload in
    lockstep/mlp) out=$("$BUILD/chapter2" --device cpu "${mlp[@]}" "${steps[@]}") ;;
    torch/mlp) out=$("$TORCH" "$REF/chapter2_torch.py" "${mlp[@]}" "${steps[@]}") ;;
    lockstep/cnn2) out=$("$BUILD/chapter2" --device cpu "${cnn2[@]}" "${steps[@]}") ;;
    torch/cnn2) out=$("$TORCH" "$REF/chapter2_torch.py" "${cnn2[@]}" "${steps[@]}") ;;
    lockstep/cnn1) out=$("$BUILD/chapter2" --device cpu "${cnn1[@]}" "${steps[@]}") ;;
    torch/cnn1) out=$("$TORCH" "$REF/chapter2_torch.py" "${cnn1[@]}" "${steps[@]}") ;;
    lockstep/ddp1) out=$("$MPIRUN" -n 1 "$BUILD/chapter4" --device cpu "${ddp[@]}" "${steps[@]}") ;;
    torch/ddp1) out=$("$TORCH" "$REF/chapter4_torch.py" --world 1 "${ddp[@]}" "${steps[@]}" 2>/dev/null) ;;
    lockstep/ddp2) out=$("$MPIRUN" -n 2 "$BUILD/chapter4" --device cpu "${ddp[@]}" "${steps[@]}") ;;
    torch/ddp2) out=$("$TORCH" "$REF/chapter4_torch.py" --world 2 "${ddp[@]}" "${steps[@]}" 2>/dev/null) ;;
  esac
  local value
  value=$(field samples_per_s <<<"$out")
  [ -n "$value" ] || { echo "torch_benchmarks.sh: the $side $workload run printed no RESULT line:" >&2; echo "$out" >&2; exit 1; }
  echo "$value"
}

WORKLOADS=(mlp cnn2 cnn1 ddp1 ddp2)
declare -A LABEL=([mlp]="MLP, batch 128, 2 threads" [cnn2]="CNN, batch 64, 2 threads" [cnn1]="CNN, batch 64, 1 thread"
  [ddp1]="DDP, 1 rank x 1 thread, CNN" [ddp2]="DDP, 2 ranks x 1 thread, CNN")
declare -A RUNS=() MEDIAN=()
for round in $(seq 1 "$ROUNDS"); do
  for workload in "${WORKLOADS[@]}"; do
    # The side that goes first alternates, so that neither always runs on a warmer machine.
    if (( round % 2 )); then order=(lockstep torch); else order=(torch lockstep); fi
    for side in "${order[@]}"; do RUNS[$side/$workload]+="$(run "$side" "$workload") "; done
  done
done
for key in "${!RUNS[@]}"; do MEDIAN[$key]=$(tr ' ' '\n' <<<"${RUNS[$key]}" | grep . | median); done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
runs() { tr ' ' '\n' <<<"$1" | grep . | awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }'; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; PyTorch $("$TORCH" -c 'import torch; print(torch.__version__)'); $STEPS steps per run, $ROUNDS rounds"
echo
echo "| workload | Lockstep samples/s | PyTorch samples/s | ratio of medians |"
echo "|---|---|---|---|"
for workload in "${WORKLOADS[@]}"; do
  echo "| ${LABEL[$workload]} | $(runs "${RUNS[lockstep/$workload]}") | $(runs "${RUNS[torch/$workload]}") |" \
    "$(ratio "${MEDIAN[lockstep/$workload]}" "${MEDIAN[torch/$workload]}") |"
done
echo "| DDP scaling, 1 to 2 ranks | $(ratio "${MEDIAN[lockstep/ddp2]}" "${MEDIAN[lockstep/ddp1]}") |" \
  "$(ratio "${MEDIAN[torch/ddp2]}" "${MEDIAN[torch/ddp1]}") | |"
