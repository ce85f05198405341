"""Chapter 4: one DDP training step of every rank, read from --trace: forward, the backward
nodes on the main thread, and beside them the buckets' all-reduces on the MPI worker's thread.
Usage: ddp_step_timeline.py TRACE.json OUT.svg  (from mpirun -n 2 chapter4 --max-steps N --trace TRACE.json)
Also prints, per rank, when each bucket's all-reduce started against the end of backward: the
numbers the chapter's text quotes beside the figure."""
import sys

from matplotlib.patches import Patch

import figstyle
import steps
import timeline
import tracefile

LABELS = {"forward": "forward", "backward": "a backward node", "ddp": "DDP: wait for a bucket, copy averages",
          "step": "optimiser step", "communication": "a bucket's all-reduce (size below it)"}
TEXT_SIZE = 8.5  # points: 11 px and more on a page at 100%


def main(trace, out):
    spans = tracefile.spans(trace)
    window = steps.typical_step(spans, pid=0)  # the ranks share one clock: rank 0's step is theirs
    ranks = sorted({s["pid"] for s in spans})
    rows, sizes, names = [], [], []
    for rank in ranks:
        step = steps.within(spans, window, pid=rank)
        main = [s for s in step if s["thread"] == "main"]
        forward = tracefile.outermost([s for s in main if s["cat"] == "module"])
        nodes = [s for s in main if s["cat"] == "autograd" and s["name"] != "backward"]
        items = [(s, "forward", None) for s in forward]
        items += [(s, "backward", None) for s in nodes]
        items += [(s, "ddp", None) for s in main if s["cat"] == "ddp"]
        items += [(s, "step", None) for s in main if s["cat"] == "optim"]
        # The buckets' worker: of this rank's MPI worker threads (chapter 6's preemption check, one
        # 4-byte all-reduce per step, runs on a process group of its own), the busiest in the trace.
        workers = [s["tid"] for s in spans if s["pid"] == rank and s["thread"] == "MPI worker"
                   and s["name"].startswith("all_reduce")]
        bucket_worker = max(set(workers), key=workers.count) if workers else None
        reduces = [s for s in step if s["tid"] == bucket_worker and s["name"].startswith("all_reduce")]
        rows.append(("rank %d: main thread" % rank, items))
        names += [(len(rows) - 1, s, "forward") for s in forward]
        names += [(len(rows) - 1, s, s["name"]) for s in nodes]
        rows.append(("rank %d: MPI worker" % rank, [(s, "communication", None) for s in reduces]))
        sizes += [(len(rows) - 1, s) for s in reduces]
        if nodes:
            start, end = min(s["start"] for s in nodes), max(s["end"] for s in nodes)
            for b, s in enumerate(reduces):
                print("rank %d: bucket %d (%s) all-reduce starts %.1f ms into backward, %.1f ms before it ends "
                      "(backward %.1f to %.1f ms of the step)" % (rank, b, s["name"].replace("all_reduce ", ""),
                                                                  s["start"] - start, end - s["start"],
                                                                  start - window[0], end - window[0]))
    length = window[1] - window[0]
    fig = figstyle.figure(6.4, 0.55 * len(rows) + 1.5)
    ax = fig.add_subplot()
    ax.set_xlim(0, length)
    used = timeline.draw(ax, rows, window[0])
    for y, s, text in names:  # names on the bars wide enough for them, at a size that reads at 100%
        if s["end"] - s["start"] > 0.017 * len(text) * length:
            ax.text((s["start"] + s["end"]) / 2 - window[0], y, text, ha="center", va="center", fontsize=TEXT_SIZE,
                    color="white")
    for y, s in sizes:
        ax.text((s["start"] + s["end"]) / 2 - window[0], y + 0.33, s["name"].replace("all_reduce ", ""), ha="center",
                va="top", fontsize=TEXT_SIZE)
    ax.set_ylim(len(rows) - 0.25, -0.6)
    ax.legend([Patch(color=figstyle.COLOURS[k]) for k in used], [LABELS[k] for k in used], frameon=False,
              loc="upper center", bbox_to_anchor=(0.4, -0.2), ncol=2, fontsize=9)
    ax.set_title("Chapter 4: one DDP step on %d ranks (CPU, MPI): all-reduces beside backward" % len(ranks))
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
