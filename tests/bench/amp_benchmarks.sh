#!/usr/bin/env bash
# Chapter 5's benchmark (make bench-amp runs this): the same training, side by side in one run,
# as Lockstep f32, Lockstep bf16 autocast, PyTorch f32 and PyTorch bf16 autocast
# (torch.autocast("cpu", dtype=torch.bfloat16), tests/reference/chapter2_torch.py with Debian's
# python3-torch), for chapter 2's CNN and MLP, batch 64, at 1 and at 2 threads. The four runs of
# a round go in a rotating order and the table gives each one's median samples/s over ROUNDS
# rounds, and the ratios. Lockstep runs chapter5 with one rank (its DDP wrapper then sends
# nothing); PyTorch runs its plain loop.
# Usage: tests/bench/amp_benchmarks.sh [BUILD_DIR] [ROUNDS] [CNN_STEPS] [MLP_STEPS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
CNN_STEPS=${3:-300}
MLP_STEPS=${4:-900}
TORCH=${TORCH_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)

# field KEY and median (reading RESULT lines and runs' numbers).
# shellcheck source=result_fields.sh
source "$HERE/result_fields.sh"

run() {  # run KIND MODEL THREADS STEPS -> samples_per_s
  local kind=$1 model=$2 threads=$3 steps=$4
  local common=(--model "$model" --threads "$threads" --epochs 1 --max-steps "$steps")
  case $kind in
    lockstep_f32) "$BUILD/chapter5" --device cpu --amp off "${common[@]}" ;;
    lockstep_bf16) "$BUILD/chapter5" --device cpu --amp bf16 "${common[@]}" ;;
    torch_f32) "$TORCH" "$HERE/../reference/chapter2_torch.py" --amp off "${common[@]}" ;;
    torch_bf16) "$TORCH" "$HERE/../reference/chapter2_torch.py" --amp bf16 "${common[@]}" ;;
  esac | field samples_per_s
}

KINDS=(lockstep_f32 lockstep_bf16 torch_f32 torch_bf16)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), bf16 GEMM path: $("$BUILD/chapter5" --device cpu --model mlp --max-steps 1 | sed -n 's/.*GEMMs on the \(.*\) path.*/\1/p')"
printf "%-5s %-7s %13s %13s %13s %13s %9s %9s %9s\n" model threads lockstep_f32 lockstep_bf16 torch_f32 torch_bf16 \
  "bf16/f32" "vs_torch" "torch_amp"
for model in cnn mlp; do
  steps=$CNN_STEPS; [ "$model" = mlp ] && steps=$MLP_STEPS
  for threads in 1 2; do
    declare -A samples=()
    for round in $(seq 1 "$ROUNDS"); do
      for i in 0 1 2 3; do
        kind=${KINDS[$(( (i + round) % 4 ))]}
        samples[$kind]+="$(run "$kind" "$model" "$threads" "$steps") "
      done
    done
    declare -A med=()
    for kind in "${KINDS[@]}"; do med[$kind]=$(echo "${samples[$kind]}" | tr ' ' '\n' | grep . | median); done
    printf "%-5s %-7s %13.0f %13.0f %13.0f %13.0f %8.2fx %8.2fx %8.2fx\n" "$model" "$threads" \
      "${med[lockstep_f32]}" "${med[lockstep_bf16]}" "${med[torch_f32]}" "${med[torch_bf16]}" \
      "$(awk -v a="${med[lockstep_bf16]}" -v b="${med[lockstep_f32]}" 'BEGIN { print a / b }')" \
      "$(awk -v a="${med[lockstep_bf16]}" -v b="${med[torch_bf16]}" 'BEGIN { print a / b }')" \
      "$(awk -v a="${med[torch_bf16]}" -v b="${med[torch_f32]}" 'BEGIN { print a / b }')"
    unset samples med
  done
done
echo "bf16/f32: Lockstep bf16 over Lockstep f32; vs_torch: Lockstep bf16 over PyTorch bf16; torch_amp: PyTorch bf16 over its f32"
