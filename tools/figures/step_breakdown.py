"""Chapter 2: where each training step's time goes, read from the --trace timeline: waiting for
the batch, forward, loss (and zero_grad), backward, optimiser step.
Usage: step_breakdown.py TRACE.json OUT.svg  (from chapter2 --max-steps N --trace TRACE.json)"""
import sys

import figstyle
import tracefile

PARTS = [("data", "next batch (wait for the loader)"), ("forward", "forward"),
         ("loss", "loss and zero_grad"), ("backward", "backward"), ("step", "optimiser step")]


def step_parts(spans):
    """For each step after the first, its parts in ms: {"data": .., "forward": .., ...}. A step runs
    from the end of the previous optimiser step to the end of its own."""
    main = [s for s in spans if s["thread"] == "main"]
    forwards = tracefile.outermost([s for s in main if s["cat"] == "module"])
    backwards = [s for s in main if s["cat"] == "autograd" and s["name"] == "backward"]
    steps = [s for s in main if s["cat"] == "optim"]
    result = []
    for k in range(1, min(len(forwards), len(backwards), len(steps))):
        f, b, o = forwards[k], backwards[k], steps[k]
        result.append({"data": f["start"] - steps[k - 1]["end"], "forward": f["end"] - f["start"],
                       "loss": b["start"] - f["end"], "backward": b["end"] - b["start"], "step": o["end"] - o["start"]})
    return result


def main(trace, out):
    parts = step_parts(tracefile.spans(trace))
    mean = {key: sum(p[key] for p in parts) / len(parts) for key, _ in PARTS}
    rows = parts + [mean]
    labels = ["step %d" % (k + 2) for k in range(len(parts))] + ["mean"]
    fig = figstyle.figure(5.0, 0.32 * len(rows) + 1.2)
    ax = fig.add_subplot()
    for y, row in enumerate(rows):
        left = 0.0
        for key, label in PARTS:
            ax.barh(y, row[key], left=left, color=figstyle.COLOURS[key], label=label if y == 0 else None,
                    edgecolor="black" if y == len(rows) - 1 else None, linewidth=0.5)
            left += row[key]
    total = sum(mean.values())
    for key, _ in PARTS:
        if mean[key] / total > 0.08:
            start = sum(mean[k] for k, _ in PARTS[:[k for k, _ in PARTS].index(key)])
            ax.text(start + mean[key] / 2, len(rows) - 1, "%.1f" % mean[key], ha="center", va="center",
                    fontsize=8.5, color="white")  # 11 px on the page at 100%
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds")
    ax.set_title("Chapter 2: one training step, part by part (CNN, batch 64, CPU)")
    ax.legend(frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
