#!/usr/bin/env bash
# make figures: the small runs of the chapters behind the book's figures, then the scripts of
# this folder that draw each SVG into chapters/chNN_*/figures/, where they are committed
# (README.md beside this script lists each command and the machine).
#
#   tools/figures/make_figures.sh BUILD_DIR     (after building chapter2 to chapter6, chapter8,
#                                                sampler_indices and cnn_roofline in BUILD_DIR)
#
# Every chapter runs on the CPU (--device cpu, whatever GPUs the machine has: the figures' titles
# say CPU) and writes its per-step CSV (--metrics), timeline (--trace) and output into
# BUILD_DIR/figures. Each command is printed as it runs; the first that fails stops the script,
# except the run killed on purpose for chapter 6's resume figure. Needs Debian's
# python3-matplotlib, which the build and the tests do not.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=${1:?usage: tools/figures/make_figures.sh BUILD_DIR}
runs=$build/figures
draw() {  # draw SCRIPT ARGS...: one of this folder's Python scripts
  /usr/bin/python3 "tools/figures/$1" "${@:2}"
}
set -x
mkdir -p "$runs" chapters/ch01_tensors/figures chapters/ch02_training/figures chapters/ch03_data_parallel/figures \
  chapters/ch04_ddp/figures chapters/ch05_mixed_precision/figures chapters/ch06_syncbn_checkpoints/figures \
  chapters/ch08_sharding/figures

# Chapter 1: matrix multiply on the CPU and on a GPU, from a committed measurement.
draw matmul_cpu_gpu.py tools/figures/data/matmul_h100.csv chapters/ch01_tensors/figures/matmul_cpu_gpu.svg

# Chapter 2: the loss curve of two epochs, one step's breakdown, and the CNN's roofline.
"$build/chapter2" --device cpu --epochs 2 --metrics "$runs/ch2.csv" > "$runs/ch2.log"
draw loss_curve.py "$runs/ch2.csv" "$runs/ch2.log" chapters/ch02_training/figures/loss_curve.svg
"$build/chapter2" --device cpu --max-steps 10 --trace "$runs/ch2-trace.json" > "$runs/ch2-trace.log"
draw step_breakdown.py "$runs/ch2-trace.json" chapters/ch02_training/figures/step_breakdown.svg
"$build/tests/cnn_roofline" --csv "$runs/roofline.csv" > "$runs/roofline.log"
draw roofline.py "$runs/roofline.csv" chapters/ch02_training/figures/roofline.svg

# Chapter 3: DataParallel's phases on a timeline.
"$build/chapter3" --device cpu --max-steps 4 --trace "$runs/ch3-trace.json" > "$runs/ch3-trace.log"
draw phases_timeline.py "$runs/ch3-trace.json" chapters/ch03_data_parallel/figures/phases_timeline.svg

# Chapter 4: a DDP step's timeline (small buckets, so that several all-reduces show; the median of 11
# steps, since a 2-core machine shared with other work varies from step to step), the
# sampler's shards, and the loss of one rank beside two.
mpirun -n 2 "$build/chapter4" --device cpu --max-steps 12 --bucket-cap-mb 0.25 --first-bucket-cap-mb 0.1 \
  --trace "$runs/ch4-trace.json" > "$runs/ch4-trace.log"
draw ddp_step_timeline.py "$runs/ch4-trace.json" chapters/ch04_ddp/figures/ddp_step_timeline.svg
"$build/tools/figures/sampler_indices" 10 2 3 > "$runs/sampler.csv"
draw sampler_shards.py "$runs/sampler.csv" chapters/ch04_ddp/figures/sampler_shards.svg
mpirun -n 1 "$build/chapter4" --device cpu --epochs 1 --metrics "$runs/ch4-1rank.csv" > "$runs/ch4-1rank.log"
mpirun -n 2 "$build/chapter4" --device cpu --epochs 1 --metrics "$runs/ch4-2ranks.csv" > "$runs/ch4-2ranks.log"
draw loss_1_vs_2_ranks.py "$runs/ch4-1rank.csv" "$runs/ch4-2ranks.csv" chapters/ch04_ddp/figures/loss_1_vs_2_ranks.svg

# Chapter 5: the bit layouts of f32, f16 and bf16 (no run: numpy's finfo and the formats' formulas),
# and the f16 loss scale, growing every 100 clean steps and halved by an inf at step 300.
draw float_formats.py chapters/ch05_mixed_precision/figures/float_formats.svg
"$build/chapter5" --device cpu --amp f16 --epochs 1 --threads 1 --growth-interval 100 --inf-at-step 300 \
  --metrics "$runs/ch5-f16.csv" > "$runs/ch5-f16.log"
draw loss_scale.py "$runs/ch5-f16.csv" chapters/ch05_mixed_precision/figures/loss_scale.svg 300

# Chapter 6's kill-and-resume figure: 120 steps, a checkpoint every 40, rank 1 killed before
# step 100 (the run's failure is the point: the script goes on), resumed from step 80.
ch6_run=(--device cpu --threads 1 --max-steps 120 --save-every 40)
rm -f "$runs/ch6-whole.safetensors" "$runs/ch6-killed.safetensors"
mpirun -n 2 "$build/chapter6" "${ch6_run[@]}" --checkpoint "$runs/ch6-whole.safetensors" \
  --metrics "$runs/ch6-whole.csv" > "$runs/ch6-whole.log"
mpirun -n 2 "$build/chapter6" "${ch6_run[@]}" --checkpoint "$runs/ch6-killed.safetensors" \
  --metrics "$runs/ch6-killed.csv" --fault kill --fault-step 100 > "$runs/ch6-killed.log" 2>&1 || true
mpirun -n 2 "$build/chapter6" "${ch6_run[@]}" --checkpoint "$runs/ch6-killed.safetensors" \
  --resume "$runs/ch6-killed.safetensors" --metrics "$runs/ch6-resumed.csv" > "$runs/ch6-resumed.log"
draw resume_curve.py "$runs/ch6-whole.csv" "$runs/ch6-killed.csv" "$runs/ch6-resumed.csv" 80 \
  chapters/ch06_syncbn_checkpoints/figures/resume_curve.svg

# Chapter 6's larger effective batch (its own script: many runs).
tools/figures/effective_batch.sh "$build" "$runs" > "$runs/effective_batch.log"
draw effective_batch.py "$runs" chapters/ch06_syncbn_checkpoints/figures/effective_batch.svg

# Chapter 8: ResNet-50 with Adam. The model state per rank of every mode on 1 to 4 ranks (memory,
# not speed: 4 ranks oversubscribe 2 cores); a rank's memory over one step in each mode; and the
# timeline of a FSDP step.
echo "mode,ranks,psi,model_state_bytes" > "$runs/ch8-memory.csv"
for shard in none zero1 zero2 fsdp; do
  for ranks in 1 2 3 4; do
    mpirun --oversubscribe -n "$ranks" "$build/chapter8" --device cpu --threads 1 --shard "$shard" --max-steps 2 \
      --batch-size 4 --eval-images 0 > "$runs/ch8-$shard-$ranks.log"
    sed -n "s/^RESULT .* parameters=\([0-9]*\) .*model_state_bytes=\([0-9]*\) .*/$shard,$ranks,\1,\2/p" \
      "$runs/ch8-$shard-$ranks.log" >> "$runs/ch8-memory.csv"
  done
done
draw zero_memory.py "$runs/ch8-memory.csv" chapters/ch08_sharding/figures/zero_memory.svg
for shard in none zero1 zero2 fsdp; do
  mpirun -n 2 "$build/chapter8" --device cpu --threads 1 --shard "$shard" --max-steps 3 --eval-images 0 \
    --memory-timeline "$runs/ch8-timeline-$shard.csv" > "$runs/ch8-timeline-$shard.log"
done
draw memory_timeline.py chapters/ch08_sharding/figures/memory_timeline.svg none="$runs/ch8-timeline-none.csv" \
  zero1="$runs/ch8-timeline-zero1.csv" zero2="$runs/ch8-timeline-zero2.csv" fsdp="$runs/ch8-timeline-fsdp.csv"
mpirun -n 2 "$build/chapter8" --device cpu --threads 1 --shard fsdp --max-steps 5 --eval-images 0 \
  --trace "$runs/ch8-trace.json" > "$runs/ch8-trace.log"
draw fsdp_step_timeline.py "$runs/ch8-trace.json" chapters/ch08_sharding/figures/fsdp_step_timeline.svg
