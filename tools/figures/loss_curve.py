"""Chapter 2: the training loss of every step, and the test accuracy after each epoch.
Usage: loss_curve.py METRICS.csv OUTPUT.log OUT.svg  (from chapter2 --metrics, and its output)"""
import sys

import figstyle
import metrics


def main(csv_path, log_path, out):
    rows = metrics.steps(csv_path)
    accuracy = metrics.test_accuracy(log_path)
    x = [r["step"] for r in rows]
    loss = [r["loss"] for r in rows]
    fig = figstyle.figure(6.0, 3.2)
    ax = fig.add_subplot()
    ax.plot(x, loss, color="#4c72b0", alpha=0.3, linewidth=0.7, label="loss of each step")
    ax.plot(x, metrics.moving_average(loss, 20), color="#4c72b0", linewidth=1.5, label="mean of the last 20 steps")
    ax.set_xlabel("training step (batch of 64)")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_ylim(bottom=0)
    ends = {}
    for r in rows:
        ends[r["epoch"]] = r["step"]
    right = ax.twinx()
    right.spines["right"].set_visible(True)
    epochs = sorted(e for e in accuracy if e in ends)
    right.plot([ends[e] for e in epochs], [accuracy[e] for e in epochs], "o--", color="#dd8452",
               label="test accuracy after the epoch")
    for e in epochs:
        right.annotate("%.1f%%" % (100 * accuracy[e]), (ends[e], accuracy[e]), textcoords="offset points",
                       xytext=(0, 6), ha="right", fontsize=8, color="#dd8452")
    right.set_ylim(0, 1)
    right.set_ylabel("test accuracy")
    for e in epochs[:-1]:
        ax.axvline(ends[e], color="#bbbbbb", linewidth=0.8, linestyle=":")
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], frameon=False, loc="center right")
    ax.set_title("Chapter 2: CNN on Fashion-MNIST, one CPU")
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
