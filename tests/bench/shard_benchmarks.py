#!/usr/bin/env python3
"""Chapter 8's benchmark (make bench-shard): every way of sharding side by side, alternated.

Each round runs `mpirun -n 2 ./chapter8 --shard MODE` once for every mode (none = DDP, zero1,
zero2, fsdp with prefetch, fsdp without), one thread per rank; the table gives each mode's
median samples/s, its ratio to DDP's, its peak model state and peak bytes per rank and its bytes
sent per step, from the RESULT lines. Then one run of DDP and one of FSDP with 4 ranks
(oversubscribed: memory, not speed) give the model state's ratio there. Not a test: it reports
ratios, it asserts nothing.

Usage: tests/bench/shard_benchmarks.py [BUILD_DIR] [ROUNDS] [STEPS]
"""
import os
import re
import statistics
import subprocess
import sys

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 6
MODES = [("none", []), ("zero1", []), ("zero2", []), ("fsdp", []), ("fsdp-noprefetch", ["--prefetch", "false"])]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(ranks, mode, extra):
    """One chapter 8 run; its RESULT line's fields."""
    shard = mode.split("-")[0]
    command = ["mpirun", "--oversubscribe", "-n", str(ranks), os.path.join(BUILD, "chapter8"), "--threads", "1",
               "--max-steps", str(STEPS), "--eval-images", "0", "--shard", shard] + extra
    out = subprocess.run(command, env=ENV, check=True, capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("RESULT "))
    return dict(re.findall(r"(\w+)=(\S+)", line))


def mib(value):
    return f"{float(value) / 2**20:.1f}"


def main():
    runs = {mode: [] for mode, _ in MODES}
    for r in range(ROUNDS):
        for mode, extra in MODES:
            runs[mode].append(run(2, mode, extra))
            print(f"round {r + 1}/{ROUNDS} {mode}: {runs[mode][-1]['samples_per_s']} samples/s", flush=True)
    speed = {mode: statistics.median(float(x["samples_per_s"]) for x in runs[mode]) for mode in runs}
    first = runs["none"][0]
    print(f"\nchapter8 --model {first['model']} --optimizer {first['optimizer']} --batch-size {first['batch']}, "
          f"2 ranks x 1 thread, {STEPS} steps (timed from the second), median of {ROUNDS} alternated rounds\n")
    print("| mode | samples/s | vs DDP | model state peak (MiB) | vs DDP | peak bytes (MiB) | sent per step (MiB) |")
    print("|---|---|---|---|---|---|---|")
    base_state = float(first["model_state_bytes"])
    for mode in runs:
        last = runs[mode][-1]
        print(f"| {mode} | {speed[mode]:.1f} | {speed[mode] / speed['none']:.3f} | {mib(last['model_state_bytes'])} | "
              f"{float(last['model_state_bytes']) / base_state:.3f} | {mib(last['peak_bytes'])} | "
              f"{mib(last['comm_bytes_per_step'])} |")
    print(f"\nBENCH shard prefetch_gain={speed['fsdp'] / speed['fsdp-noprefetch']:.3f} "
          + " ".join(f"{mode}_vs_ddp={speed[mode] / speed['none']:.3f}" for mode in runs if mode != "none"))
    # Memory with 4 ranks: one run each.
    ddp4, fsdp4 = run(4, "none", []), run(4, "fsdp", [])
    print(f"BENCH shard4 ddp_model_state_mib={mib(ddp4['model_state_bytes'])} "
          f"fsdp_model_state_mib={mib(fsdp4['model_state_bytes'])} "
          f"ratio={float(fsdp4['model_state_bytes']) / float(ddp4['model_state_bytes']):.3f}")


if __name__ == "__main__":
    main()
