"""Chapter 6: what a larger effective batch does to accuracy. Test accuracy after every epoch of
the CNN on Fashion-MNIST (SGD, momentum 0.9, 64 images per micro-batch) for five runs: (a) one
process at lr 0.05; an effective batch of 512 (2 ranks x 4 accumulated micro-batches) at (b) the
same lr, (c) the lr scaled linearly to 0.4, (d) 0.4 after a warm-up from 0.05 over the first
epoch, (e) 0.14 after the same warm-up. Also prints the page's two tables (markdown): every epoch
of the five runs, and (b) to (e) after 1 and 2 epochs with seeds 0, 1 and 2.
Usage: effective_batch.py RUNS_DIR OUT.svg
(RUNS_DIR: where tools/figures/effective_batch.sh wrote eb-a.log ... eb-e-seed2.log)"""
import os
import sys

import figstyle
import metrics

RUNS = [
    ("a", "(a) 1 process, batch 64, lr 0.05", "-", "o"),
    ("b", "(b) batch 512, lr 0.05", "--", "s"),
    ("c", "(c) batch 512, lr 0.4 (linear scaling)", "-.", "^"),
    ("d", "(d) batch 512, lr 0.4, warm-up over epoch 1", ":", "D"),
    ("e", "(e) batch 512, lr 0.14, warm-up over epoch 1", "-", "v"),
]
COLOURS = figstyle.RANK_COLOURS + ["#8172b3"]


def main(runs_dir, out):
    accuracy = {name: metrics.test_accuracy(os.path.join(runs_dir, "eb-%s.log" % name)) for name, *_ in RUNS}
    epochs = sorted(accuracy["a"])
    fig = figstyle.figure(6.4, 3.4)
    ax = fig.add_subplot()
    low, high = 0.74, 0.91  # the runs that learn; one that does not is named below the axis
    for (name, label, style, marker), colour in zip(RUNS, COLOURS):
        xs = sorted(accuracy[name])
        ys = [accuracy[name][e] for e in xs]
        if max(ys) < low:
            label += ": %.2f, below the axis" % max(ys)
        ax.plot(xs, ys, style, marker=marker, markersize=4, color=colour, label=label)
    ax.set_xticks(epochs)
    ax.set_ylim(low, high)
    ax.set_xlabel("epoch (a: 938 optimiser steps each; b to e: 117)")
    ax.set_ylabel("test accuracy (10,000 images)")
    ax.set_title("Chapter 6: the CNN on Fashion-MNIST, effective batch 64 vs 512 (CPU)")
    # The legend below the axes, off the curves (they cross the whole width of the plot).
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(-0.08, -0.17), handlelength=2.6)
    figstyle.save(fig, out)

    print("| run | " + " | ".join("epoch %d" % e for e in epochs) + " |")
    print("|---|" + "---:|" * len(epochs))
    for name, label, *_ in RUNS:
        print("| " + label + " | " + " | ".join("%.4f" % accuracy[name][e] if e in accuracy[name] else "-"
                                               for e in epochs) + " |")
    print()
    print("| run | seed 0 | seed 1 | seed 2 |")
    print("|---|---:|---:|---:|")
    for name, label, *_ in RUNS[1:]:
        cells = []
        for seed in (0, 1, 2):
            acc = accuracy[name] if seed == 0 else metrics.test_accuracy(
                os.path.join(runs_dir, "eb-%s-seed%d.log" % (name, seed)))
            cells.append(" / ".join("%.4f" % acc[e] for e in (1, 2)))
        print("| " + label + " | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(*sys.argv[1:])
