#!/bin/sh
# Chapter 6's lesson "a larger effective batch": the runs behind figures/effective_batch.svg and
# the page's tables. The CNN on Fashion-MNIST, SGD with momentum 0.9, 64 images per micro-batch,
# one thread per rank, EPOCHS epochs each (test accuracy printed after every epoch):
#   (a) one process, lr 0.05                                  938 optimiser steps per epoch
#   (b) 2 ranks x --accumulate 4 = 512 images per step, lr 0.05       117 steps per epoch
#   (c) the same with the lr scaled linearly, 8 x 0.05 = 0.4
#   (d) (c) with a warm-up from 0.05 to 0.4 over the first epoch, per optimiser step
#   (e) lr 0.14 (0.05 x sqrt 8) with a warm-up from 0.05 over the first epoch
# then (b) to (e) for 2 epochs with seeds 1 and 2, to tell the rule from the luck of one seed.
# First, a check of the page's claim that 2 ranks x 4 micro-batches make the update of one
# process x 8 micro-batches (the CNN has no BatchNorm): 1 and 30 steps of each, the weights compared.
#
#   tools/figures/effective_batch.sh BUILD_DIR OUT_DIR [EPOCHS]     (EPOCHS: 5)
#   /usr/bin/python3 tools/figures/effective_batch.py OUT_DIR OUT.svg
#
# MPIRUN overrides the launcher (e.g. "mpirun --allow-run-as-root").
set -eu
build=$1
out=$2
epochs=${3:-5}
mpirun=${MPIRUN:-mpirun}
program="$build/chapter6"
common="--device cpu --threads 1 --model cnn --norm batch --batch-size 64"
mkdir -p "$out"

# The claim: after 1 step the weights agree to f32 rounding; later steps carry the difference on.
for steps in 1 30; do
  for job in "2 4" "1 8"; do
    set -- $job
    rm -f "$out/eb-check-$1.safetensors"
    $mpirun -n "$1" "$program" $common --accumulate "$2" --max-steps $steps --save-every $steps \
      --checkpoint "$out/eb-check-$1.safetensors" > "$out/eb-check-$1.log"
  done
  /usr/bin/python3 - "$out/eb-check-2.safetensors" "$out/eb-check-1.safetensors" $steps <<'EOF' || true
import sys
try:
    from safetensors.numpy import load_file
    import numpy as np
except ImportError as e:
    sys.exit(f"effective_batch.sh: the check of 2 x 4 against 1 x 8 needs safetensors ({e}); skipped")
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
worst = max(float(np.abs(a[k].astype(np.float64) - b[k]).max() / np.abs(b[k]).max()) for k in a if k.startswith("model."))
print(f"2 ranks x --accumulate 4 vs 1 rank x --accumulate 8, after {sys.argv[3]} step(s): the weights differ by "
      f"at most {worst:.1e} of each tensor's largest value")
EOF
  grep -h "^RESULT" "$out/eb-check-2.log" "$out/eb-check-1.log"
done

run() {  # run NAME RANKS ARGS...: one run, its output in OUT_DIR/eb-NAME.log, its time said
  name=$1 ranks=$2
  shift 2
  start=$(date +%s)
  $mpirun -n "$ranks" "$program" $common "$@" > "$out/eb-$name.log"
  echo "($name) $(grep -h '^RESULT' "$out/eb-$name.log") in $(($(date +%s) - start)) s"
}
large="--accumulate 4"  # with 2 ranks: 512 images per optimiser step
run a 1 --epochs "$epochs" --lr 0.05
run b 2 $large --epochs "$epochs" --lr 0.05
run c 2 $large --epochs "$epochs" --lr 0.4
run d 2 $large --epochs "$epochs" --lr 0.4 --warmup-epochs 1
run e 2 $large --epochs "$epochs" --lr 0.14 --warmup-epochs 1
for seed in 1 2; do
  run b-seed$seed 2 $large --epochs 2 --seed $seed --lr 0.05
  run c-seed$seed 2 $large --epochs 2 --seed $seed --lr 0.4
  run d-seed$seed 2 $large --epochs 2 --seed $seed --lr 0.4 --warmup-epochs 1
  run e-seed$seed 2 $large --epochs 2 --seed $seed --lr 0.14 --warmup-epochs 1
done
