#!/usr/bin/env bash
# Everything that needs a GPU, in one run, for a machine with an NVIDIA GPU and the CUDA
# toolkit: build, the GPU tests, compute-sanitizer on them, the chapters on the GPU, the
# benchmarks, and PyTorch on the same GPU for comparison. Usage:
#   tests/gpu/check_on_gpu.sh LOGDIR [STEP...]   (or: make gpu-check GPU_LOGS=LOGDIR GPU_STEPS="...")
# Writes LOGDIR/gpu-check.log (every step's output) and LOGDIR/summary.txt (one line per step
# with its exit status). Steps go on after a failure, so one run shows everything, and the script
# exits 1 if any failed; a failed configure or build stops it at once (the steps after would
# run an older build). Naming steps runs only those (after configure and build, which are
# quick once built), so the whole check can be split over several shorter runs; `--list`
# prints the step names, and a name not among them is refused.
# Dependencies missing on the machine are taken from .deps/root if it exists (make gpu-deps).
set -u
LOGDIR=${1:-build/gpu-logs}
shift $(($# > 0 ? 1 : 0))
ONLY=" $* "
BUILD=${GPU_BUILD_DIR:-build-gpu}
JOBS=$(nproc)
[ "$LOGDIR" = --list ] || mkdir -p "$LOGDIR"
LOG="$LOGDIR/gpu-check.log"
SUMMARY="$LOGDIR/summary.txt"
if [ "$LOGDIR" != --list ]; then
  # A misspelt step would otherwise be skipped silently.
  KNOWN=" $(bash "$0" --list | tr '\n' ' ') "
  for name in "$@"; do
    [[ "$KNOWN" == *" $name "* ]] || { echo "check_on_gpu.sh: no step named '$name'; the steps are:$KNOWN" >&2; exit 2; }
  done
  : >"$LOG"
  : >"$SUMMARY"
fi
FAILED=""

CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release)
# GPU_CUDA_ARCH=90 builds for the one GPU at hand only, which compiles faster.
[ -n "${GPU_CUDA_ARCH:-}" ] && CMAKE_ARGS+=("-DCMAKE_CUDA_ARCHITECTURES=$GPU_CUDA_ARCH")
if [ -d .deps/root/usr ]; then
  CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$PWD/.deps/root/usr")
  export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  [ -d .deps/root/usr/share/datasets/fashion-mnist ] && export LOCKSTEP_DATA="$PWD/.deps/root/usr/share/datasets/fashion-mnist"
fi

# step NAME COMMAND...: runs the command, appends its output to the log, records its status.
# Skipped when steps were named and NAME is not one of them (configure and build always run).
step() {
  local name=$1
  shift
  if [ "$LOGDIR" = --list ]; then
    echo "$name"
    return
  fi
  case "$name" in configure | build) ;; *) [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $name "* ]] || return 0 ;; esac
  local start=$SECONDS
  printf '\n===== %s: %s\n' "$name" "$*" >>"$LOG"
  "$@" >>"$LOG" 2>&1
  local status=$?
  printf '%-22s exit %3d  %4ds\n' "$name" "$status" $((SECONDS - start)) | tee -a "$SUMMARY"
  [ $status = 0 ] || FAILED="$FAILED $name"
  return $status
}

# succeeds_printing PATTERN COMMAND...: runs the command and shows its output; succeeds only if
# the command did and its output matches PATTERN (grep's basic regular expression).
succeeds_printing() {
  local pattern=$1
  shift
  local output
  output=$("$@" 2>&1)
  local status=$?
  echo "$output"
  [ $status = 0 ] && grep -q "$pattern" <<<"$output"
}

TRAIN=(--model cnn --epochs 2 --batch-size 64 --lr 0.05)
step gpu_info nvidia-smi
# Configure must find nvcc: without it CMake quietly builds for the CPU only, and every GPU
# test would then report itself skipped.
step configure succeeds_printing "CUDA backend enabled" cmake -S . -B "$BUILD" "${CMAKE_ARGS[@]}" || exit 1
step build cmake --build "$BUILD" -j "$JOBS" || exit 1
step gpu_tests "$BUILD/tests/gpu_tests"
# compute-sanitizer over the whole binary, in two steps that can go to separate runs: the
# training tests launch tens of thousands of kernels, each slowed down by the instrumentation.
# The caching allocator is off for them, so that every tensor has its exact bounds and a freed
# block is really gone; the allocator's own tests, which check its caching, ran above.
LONG_TESTS="TrainingGpu.*:DataParallelCuda.ResNet*"
MEMCHECK=(env LOCKSTEP_NO_CUDA_MEMORY_CACHING=1
  compute-sanitizer --tool memcheck --error-exitcode 1 "$BUILD/tests/gpu_tests")
step memcheck "${MEMCHECK[@]}" --gtest_filter="-$LONG_TESTS:CachingAllocator.*"
step memcheck_training "${MEMCHECK[@]}" --gtest_filter="$LONG_TESTS"
# The kernels that share memory between the threads of a block: reductions, softmax, batch
# norm, the teaching GEMM, and their 16-bit versions.
step racecheck compute-sanitizer --tool racecheck --error-exitcode 1 "$BUILD/tests/gpu_tests" \
  --gtest_filter="GpuReduce*:GpuMax*:GpuSoftmax*:GpuLoss*:BatchNormGpu*:GpuMatmul*:Gpu16bit*"
step unit_tests "$BUILD/tests/unit_tests"
step chapter1_cuda "$BUILD/chapter1" --device cuda
step chapter2_cuda "$BUILD/chapter2" --device cuda "${TRAIN[@]}"
# The CPU's result does not depend on the thread count (chapter 2, section 4), nor, on CPUs
# with FMA, on the vector width: with this machine's threads the run must print what the book
# printed with 1 and 2 threads (seed 0).
step chapter2_cpu succeeds_printing "test_acc=0.8659 final_loss=0.432213" \
  "$BUILD/chapter2" --device cpu "${TRAIN[@]}" --threads "$JOBS"
# One seed says little about a 0.5-point difference: after two epochs the CNN's accuracy moves
# by a point or two with the seed. Seeds 0-8 on each device, then the mean test accuracy of
# each and their difference.
seeds_on_both_devices() {
  local results="$LOGDIR/chapter2_seeds.txt"
  : >"$results"
  for seed in 0 1 2 3 4 5 6 7 8; do
    for device in cuda cpu; do
      # A run that fails leaves no RESULT line, and the step fails with it.
      "$BUILD/chapter2" --device $device "${TRAIN[@]}" --seed $seed | grep RESULT | tee -a "$results"
      [ "${PIPESTATUS[0]}" = 0 ] || return 1
    done
  done
  # The difference of two means is itself noisy: its standard error, from each device's
  # spread over the seeds, says how far apart the means may land by chance alone.
  awk '{ for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
         d = v["device"] == "cpu" ? "cpu" : "cuda"; sum[d] += v["test_acc"]; squares[d] += v["test_acc"] ^ 2; n[d]++ }
       END { for (d in n) { mean[d] = sum[d] / n[d]; variance[d] = (squares[d] - n[d] * mean[d] ^ 2) / (n[d] - 1) }
             printf "mean test_acc over %d seeds: cuda %.4f (sd %.4f), cpu %.4f (sd %.4f), cuda - cpu %+.2f points (standard error %.2f)\n",
                    n["cuda"], mean["cuda"], sqrt(variance["cuda"]), mean["cpu"], sqrt(variance["cpu"]),
                    100 * (mean["cuda"] - mean["cpu"]), 100 * sqrt(variance["cuda"] / n["cuda"] + variance["cpu"] / n["cpu"]) }' \
    "$results" | tee -a "$SUMMARY"
}
step chapter2_seeds seeds_on_both_devices
# Chapter 3: two replicas sharing the GPU, one epoch, beside chapter 2's one epoch.
# --cuda-graph: chapter 2's CNN at batch 64 is launch-bound; the same 400 steps eager and
# replayed from a CUDA graph, alternated twice, and the ratio printed (a benchmark, no floor).
graph_against_eager() {
  local run=("$BUILD/chapter2" --device cuda --model cnn --batch-size 64 --epochs 1 --max-steps 400)
  local eager graphed round
  local -
  set -o pipefail
  for round in 1 2; do
    eager=$("${run[@]}" | tee /dev/stderr | sed -n 's/^RESULT .*samples_per_s=\([0-9.]*\).*/\1/p') || return 1
    graphed=$("${run[@]}" --cuda-graph | tee /dev/stderr | sed -n 's/^RESULT .*samples_per_s=\([0-9.]*\).*/\1/p') || return 1
    [ -n "$eager" ] && [ -n "$graphed" ] || return 1
    echo "round $round: eager $eager samples/s, cuda graph $graphed samples/s: $(awk -v g="$graphed" -v e="$eager" 'BEGIN { printf "%.2f", g / e }')x"
  done
}
step chapter2_cuda_graph graph_against_eager
step chapter3_cuda_2 "$BUILD/chapter3" --device cuda --replicas 2 --epochs 1
step chapter3_cuda_3 "$BUILD/chapter3" --device cuda --replicas 3 --max-steps 300
step chapter2_cuda_1 "$BUILD/chapter2" --device cuda --epochs 1
step torch_cuda python3 tests/reference/chapter2_torch.py --device cuda "${TRAIN[@]}"
# The MLP row of chapter 2's GPU table.
MLP=(--model mlp --epochs 5 --batch-size 128 --lr 0.05)
step chapter2_mlp_cuda "$BUILD/chapter2" --device cuda "${MLP[@]}"
step torch_mlp_cuda python3 tests/reference/chapter2_torch.py --device cuda "${MLP[@]}"
# Chapter 4 on the GPU: one rank over NCCL (NCCL allows one rank per GPU), two ranks sharing the
# GPU over MPI with CUDA tensors staged through pinned memory, and the refusal of NCCL for two
# ranks on one GPU. Open MPI runs as root only when told so.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CH4=(--device cuda --epochs 2 --batch-size 64 --lr 0.05)
step mpi_tests mpirun -n 2 "$BUILD/tests/mpi_tests"
# The NCCL tests skip unless every rank has a GPU of its own: one rank here, and all four must run.
step mpi_nccl_1 succeeds_printing '^\[  PASSED  \] 4 tests' \
  mpirun -n 1 "$BUILD/tests/mpi_tests" --gtest_filter='Nccl*' --gtest_color=no
step chapter4_nccl_1 mpirun -n 1 "$BUILD/chapter4" --backend nccl "${CH4[@]}"
# The CNN's gradients (0.86 MiB) fit DDP's first bucket, so its one all-reduce starts only when
# backward is over. With small buckets the all-reduces start during backward (with NCCL, on the
# communication stream beside the compute stream; with MPI, on its worker thread), and the
# weights must come out with the same bits as with one bucket: with one or two ranks each
# element's average is one addition, whatever the buckets (with more ranks the order of the
# additions may depend on where an element sits in its bucket).
same_weights_with_small_buckets() {
  local ranks=$1 backend=$2 one several
  local run=(mpirun -n "$ranks" "$BUILD/chapter4" --backend "$backend" --device cuda --epochs 1 --max-steps 100)
  one=$("${run[@]}" 2>&1) || { echo "$one"; return 1; }
  several=$("${run[@]}" --first-bucket-cap-mb 0.05 --bucket-cap-mb 0.2 2>&1) || { echo "$several"; return 1; }
  echo "$one"
  echo "$several"
  local want got
  want=$(grep -o 'epoch 1: checksum [0-9a-f]*' <<<"$one" | head -1)
  got=$(grep -o 'epoch 1: checksum [0-9a-f]*' <<<"$several" | head -1)
  echo "one bucket: ${want:-no checksum}; small buckets: ${got:-no checksum}"
  [ -n "$want" ] && [ "$want" = "$got" ] && [ "$(grep -c '^bucket ' <<<"$several")" -gt 1 ]
}
step chapter4_buckets_nccl_1 same_weights_with_small_buckets 1 nccl
step chapter4_buckets_mpi_2 same_weights_with_small_buckets 2 mpi
step chapter4_mpi_cuda_2 mpirun -n 2 "$BUILD/chapter4" --backend mpi "${CH4[@]}"
# The ResNet has BatchNorm buffers, which DDP broadcasts from rank 0 before every forward (the
# batch counters as i64) and the program before its in-sync check; on the small made-up CIFAR-10
# with varied pixels that the tests' configure step writes.
RESNET=(--device cuda --model resnet --dataset cifar10 --data "$BUILD/tests/varied-cifar10" --batch-size 4 --epochs 2)
step chapter4_resnet_nccl_1 mpirun -n 1 "$BUILD/chapter4" --backend nccl "${RESNET[@]}"
step chapter4_resnet_mpi_2 mpirun -n 2 "$BUILD/chapter4" --backend mpi "${RESNET[@]}"
step chapter4_auto_2 mpirun -n 2 "$BUILD/chapter4" --backend auto --device cuda --max-steps 50
# Passes only if chapter4 itself refused, with its message: a missing mpirun fails too.
nccl_refused_for_two_ranks_on_one_gpu() {
  local output
  output=$(mpirun -n 2 "$BUILD/chapter4" --backend nccl --device cuda --max-steps 5 2>&1)
  local status=$?
  echo "$output"
  [ $status != 0 ] && grep -q "NCCL needs one GPU per rank" <<<"$output"
}
step chapter4_nccl_2_refused nccl_refused_for_two_ranks_on_one_gpu
# Chapter 4 on this machine's CPU, with its threads shared between two ranks: it must print the
# weight checksum chapter 4's page printed with one thread per rank on a 2-core machine.
step chapter4_cpu succeeds_printing "epoch 2: checksum 5c3f90a9cfb7ead5" mpirun -n 2 "$BUILD/chapter4"
# Chapter 5 on the GPU: f16 autocast with a GradScaler (the default there) and bf16 beside f32,
# one rank over NCCL; an inf injected on rank 1 of two ranks sharing the GPU over MPI must be
# skipped by both (the program stops if their weights differ); PyTorch's autocast on the same GPU.
CH5=(--device cuda --epochs 2 --batch-size 64 --lr 0.05)
step chapter5_f16_nccl_1 mpirun -n 1 "$BUILD/chapter5" --backend nccl "${CH5[@]}"
step chapter5_bf16_nccl_1 mpirun -n 1 "$BUILD/chapter5" --backend nccl --amp bf16 "${CH5[@]}"
step chapter5_f32_nccl_1 mpirun -n 1 "$BUILD/chapter5" --backend nccl --amp off "${CH5[@]}"
step chapter5_inf_mpi_2 succeeds_printing "skipped_steps=1 final_scale=512 " \
  mpirun -n 2 "$BUILD/chapter5" --backend mpi --device cuda --amp f16 --init-scale 1024 --model mlp --max-steps 20 \
  --inf-at-step 10 --inf-on-rank 1
step chapter5_resnet_f16_nccl_1 mpirun -n 1 "$BUILD/chapter5" --backend nccl "${RESNET[@]}"
# ResNet-50 in 16 bits against f32, and PyTorch's AMP on the same GPU: 100 steps of 256
# Fashion-MNIST images each (the results table's per-device batch), one rank.
R50=(--model resnet50 --batch-size 256 --epochs 1 --max-steps 100)
step resnet50_f32 mpirun -n 1 "$BUILD/chapter5" --backend nccl --device cuda --amp off "${R50[@]}"
step resnet50_f16 mpirun -n 1 "$BUILD/chapter5" --backend nccl --device cuda --amp f16 "${R50[@]}"
step resnet50_bf16 mpirun -n 1 "$BUILD/chapter5" --backend nccl --device cuda --amp bf16 "${R50[@]}"
step torch_resnet50_f16 python3 tests/reference/chapter2_torch.py --device cuda --amp f16 "${R50[@]}"
step torch_amp_cuda python3 tests/reference/chapter2_torch.py --device cuda --amp f16 "${TRAIN[@]}"
# Chapter 6 on the GPU: SyncBatchNorm's CUDA kernels and its collectives on GPU tensors (one
# rank over NCCL; two sharing the GPU over MPI), a checkpoint read back by every rank, and a
# watchdog whose NCCL communicator is polled for errors.
CH6=(--device cuda --max-steps 60 --save-every 30)
step chapter6_nccl_1 mpirun -n 1 "$BUILD/chapter6" --backend nccl "${CH6[@]}" --checkpoint "$LOGDIR/ch6-nccl.safetensors"
step chapter6_mpi_2 mpirun -n 2 "$BUILD/chapter6" --backend mpi "${CH6[@]}" --checkpoint "$LOGDIR/ch6-mpi.safetensors"
step chapter6_resume_mpi_2 mpirun -n 2 "$BUILD/chapter6" --backend mpi --device cuda --max-steps 90 --save-every 30 \
  --checkpoint "$LOGDIR/ch6-mpi.safetensors" --resume "$LOGDIR/ch6-mpi.safetensors"
# Chapter 8 on the GPU: every way of sharding ResNet-50 with CUDA tensors, FSDP over NCCL with
# one rank and over MPI staging with two ranks sharing the GPU; the sharded checkpoint saved by
# two ranks and resumed by one; the four modes ending with the same weights over MPI.
CH8=(--device cuda --max-steps 6 --batch-size 64)
step chapter8_fsdp_nccl_1 mpirun -n 1 "$BUILD/chapter8" --backend nccl "${CH8[@]}"
for shard in none zero1 zero2 fsdp; do
  step "chapter8_${shard}_mpi_2" mpirun -n 2 "$BUILD/chapter8" --backend mpi --shard "$shard" "${CH8[@]}"
done
step chapter8_save_mpi_2 mpirun -n 2 "$BUILD/chapter8" --backend mpi --device cuda --max-steps 3 --save-every 3 \
  --checkpoint "$LOGDIR/ch8-checkpoint" --eval-images 0
step chapter8_resume_nccl_1 mpirun -n 1 "$BUILD/chapter8" --backend nccl --device cuda --max-steps 6 \
  --resume "$LOGDIR/ch8-checkpoint" --eval-images 0
# Chapter 7's table on this machine's GPUs: ResNet-50, one whole Fashion-MNIST epoch per row
# (the rows needing more GPUs than there are say so), PyTorch's one device beside it where
# torchvision can be imported; the table, chart and logs go to LOGDIR/results.
step results_cuda python3 tools/results/results.py --build "$BUILD" --out "$LOGDIR/results" --devices cuda \
  --torch-python python3
step bench_elementwise "$BUILD/tests/bench_cuda_elementwise"
step bench_gemm "$BUILD/tests/bench_cuda_gemm"
step bench_gemm_16bit "$BUILD/tests/bench_cuda_gemm_16bit"
[ "$LOGDIR" = --list ] && exit 0
echo "Log: $LOG"
if [ -n "$FAILED" ]; then
  echo "Failed:$FAILED" | tee -a "$SUMMARY"
  exit 1
fi
echo "Every step passed." | tee -a "$SUMMARY"
