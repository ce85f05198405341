"""Chapter 4: rank 0's training loss per step, with 1 rank and with 2 ranks (batch 64 per rank,
so 64 and 128 samples per step: the 2-rank run needs half the steps for an epoch).
Usage: loss_1_vs_2_ranks.py ONE_RANK.csv TWO_RANKS.csv OUT.svg  (chapter4 --metrics, mpirun -n 1 and -n 2)"""
import sys

import figstyle
import metrics


def main(one_rank, two_ranks, out):
    fig = figstyle.figure(6.0, 3.2)
    ax = fig.add_subplot()
    for path, label, colour in [(one_rank, "1 rank (64 samples per step)", figstyle.RANK_COLOURS[0]),
                                (two_ranks, "2 ranks (2 x 64 samples per step)", figstyle.RANK_COLOURS[1])]:
        rows = metrics.steps(path)
        x = [r["step"] for r in rows]
        loss = [r["loss"] for r in rows]
        ax.plot(x, loss, color=colour, alpha=0.25, linewidth=0.7)
        ax.plot(x, metrics.moving_average(loss, 20), color=colour, linewidth=1.5, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss of rank 0's batch")
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False, title="mean of the last 20 steps (faint: each step)", title_fontsize=8)
    ax.set_title("Chapter 4: one epoch of the CNN on Fashion-MNIST, 1 vs 2 ranks (CPU)")
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
