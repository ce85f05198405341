"""Chapter 4: one DDP training step of every rank, read from --trace: forward, the backward
nodes on the main thread, and beside them the buckets' all-reduces on the MPI worker's thread.
Usage: ddp_step_timeline.py TRACE.json OUT.svg  (from mpirun -n 2 chapter4 --max-steps N --trace TRACE.json)"""
import sys

import figstyle
import steps
import timeline
import tracefile

LABELS = {"forward": "forward", "backward": "a backward node", "ddp": "DDP: wait for a bucket, copy averages",
          "step": "optimiser step", "communication": "a bucket's all-reduce (size below)"}


def main(trace, out):
    spans = tracefile.spans(trace)
    window = steps.typical_step(spans, pid=0)  # the ranks share one clock: rank 0's step is theirs
    ranks = sorted({s["pid"] for s in spans})
    rows, sizes = [], []
    for rank in ranks:
        step = steps.within(spans, window, pid=rank)
        main = [s for s in step if s["thread"] == "main"]
        items = [(s, "forward", "forward") for s in tracefile.outermost([s for s in main if s["cat"] == "module"])]
        items += [(s, "backward", s["name"]) for s in main if s["cat"] == "autograd" and s["name"] != "backward"]
        items += [(s, "ddp", None) for s in main if s["cat"] == "ddp"]
        items += [(s, "step", None) for s in main if s["cat"] == "optim"]
        reduces = [s for s in step if s["thread"] == "MPI worker" and s["name"].startswith("all_reduce")]
        rows.append(("rank %d: main thread" % rank, items))
        rows.append(("rank %d: MPI worker" % rank, [(s, "communication", None) for s in reduces]))
        sizes += [(len(rows) - 1, s) for s in reduces]
    fig = figstyle.figure(7.0, 0.5 * len(rows) + 1.0)
    ax = fig.add_subplot()
    ax.set_xlim(0, window[1] - window[0])
    used = timeline.draw(ax, rows, window[0])
    for y, s in sizes:
        ax.text((s["start"] + s["end"]) / 2 - window[0], y + 0.35, s["name"].replace("all_reduce ", ""), ha="center",
                va="top", fontsize=6.5)
    ax.set_ylim(len(rows) - 0.3, -0.6)
    timeline.legend(ax, used, LABELS)
    ax.set_title("Chapter 4: one DDP step on %d ranks (CPU, MPI): all-reduces beside backward" % len(ranks))
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
