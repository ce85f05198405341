"""Chapter 4: which samples DistributedSampler gives each rank, epoch after epoch (with
set_epoch): every sample once per epoch, split between the ranks, in a new order each epoch.
Usage: sampler_shards.py INDICES.csv OUT.svg  (INDICES: sampler_indices SIZE RANKS EPOCHS)"""
import csv
import sys

import figstyle


def main(indices, out):
    with open(indices) as f:
        rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(f)]
    epochs = sorted({r["epoch"] for r in rows})
    size = max(r["index"] for r in rows) + 1
    fig = figstyle.figure(0.42 * size + 2.2, 0.55 * len(epochs) + 1.0)
    ax = fig.add_subplot()
    ranks = sorted({r["rank"] for r in rows})
    for r in rows:
        y = epochs.index(r["epoch"])
        ax.add_patch(figstyle.plt.Rectangle((r["index"] - 0.45, y - 0.4), 0.9, 0.8,
                                            color=figstyle.RANK_COLOURS[r["rank"] % len(figstyle.RANK_COLOURS)]))
        ax.text(r["index"], y, str(r["position"] + 1), ha="center", va="center", color="white", fontsize=9)
    ax.set_xlim(-0.6, size - 0.4)
    ax.set_ylim(len(epochs) - 0.5, -0.5)
    ax.set_xticks(range(size))
    ax.set_xlabel("sample index in the dataset (the number on it: its place in that rank's order)")
    ax.set_yticks(range(len(epochs)))
    ax.set_yticklabels(["epoch %d" % e for e in epochs])
    ax.spines["left"].set_visible(False)
    ax.tick_params(axis="y", length=0)
    handles = [figstyle.plt.Rectangle((0, 0), 1, 1, color=figstyle.RANK_COLOURS[k]) for k in ranks]
    ax.legend(handles, ["rank %d" % k for k in ranks], frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("DistributedSampler: %d samples over %d ranks, set_epoch(0), (1), (2)" % (size, len(ranks)))
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
