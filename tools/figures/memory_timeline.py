"""Chapter 8: a rank's memory over one training step in each mode, from chapter8 --memory-timeline:
the ledger's categories stacked, so that the top line is every live byte.
Usage: memory_timeline.py OUT.svg MODE=CSV ...  (one CSV per mode, in the order to draw them)"""
import csv
import sys

import figstyle

TITLES = {"none": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "fsdp": "FSDP"}


POINTS = 80  # samples drawn per panel: a step has thousands; each kept one is its bin's highest


def read(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    header, data = rows[0], rows[1:]
    # Thin the samples to POINTS bins of equal time, keeping each bin's highest total, so that the
    # peaks survive and the SVG stays small.
    start, end = float(data[0][0]), float(data[-1][0])
    bins = {}
    for r in data:
        b = min(POINTS - 1, int((float(r[0]) - start) / max(end - start, 1e-9) * POINTS))
        if b not in bins or sum(map(int, r[1:])) > sum(map(int, bins[b][1:])):
            bins[b] = r
    data = [bins[b] for b in sorted(bins)]
    seconds = [float(r[0]) for r in data]
    return header[1:], seconds, [[int(r[c]) / 2**20 for r in data] for c in range(1, len(header))]


def main(out, *runs):
    fig = figstyle.figure(7.0, 5.2)
    axes = fig.subplots(2, 2, sharey=True).flatten()
    for ax, run in zip(axes, runs):
        mode, path = run.split("=", 1)
        names, seconds, series = read(path)
        start = seconds[0]
        t = [1000 * (s - start) for s in seconds]
        ax.stackplot(t, series, colors=[figstyle.MEMORY_COLOURS[n] for n in names], labels=names, step="post")
        ax.set_title(TITLES.get(mode, mode))
        ax.set_xlabel("milliseconds into the step")
        ax.set_xlim(0, t[-1])
    axes[0].set_ylabel("MiB on rank 0")
    axes[2].set_ylabel("MiB on rank 0")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, frameon=False, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3)
    fig.suptitle("Chapter 8: one step of ResNet-50 with Adam on 2 ranks, memory by category")
    fig.tight_layout()
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
