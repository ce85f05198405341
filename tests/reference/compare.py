#!/usr/bin/env python3
"""Prints Lockstep's RESULT line beside PyTorch's and the ratios that matter.

Usage: compare.py LOCKSTEP_OUTPUT TORCH_OUTPUT (files holding each program's output)."""
import sys


def result(path):
    for line in open(path):
        if line.startswith("RESULT "):
            return dict(field.split("=", 1) for field in line.split()[1:])
    sys.exit(f"compare.py: no RESULT line in {path}")


ours, theirs = result(sys.argv[1]), result(sys.argv[2])
print(f"{'':14} {'lockstep':>12} {'pytorch':>12}")
for key in ("samples_per_s", "epoch_s", "test_acc", "final_loss"):
    print(f"{key:14} {ours[key]:>12} {theirs[key]:>12}")
print(f"throughput ratio (lockstep / pytorch): {float(ours['samples_per_s']) / float(theirs['samples_per_s']):.2f}x")
print(f"accuracy difference (points): {100 * (float(ours['test_acc']) - float(theirs['test_acc'])):+.2f}")
