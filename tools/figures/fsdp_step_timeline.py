"""Chapter 8: one FSDP training step of every rank, read from --trace: the units' forward and the
backward nodes on the main thread, FSDP's waits for its collectives, and beside them on the MPI
worker's thread the all-gathers of the units' parameters and the reduce-scatters of their
gradients.
Usage: fsdp_step_timeline.py TRACE.json OUT.svg  (from mpirun -n 2 chapter8 --shard fsdp --trace TRACE.json)"""
import sys

from matplotlib.patches import Patch

import figstyle
import steps
import timeline
import tracefile

LABELS = {"forward": "a block's forward", "backward": "a backward node", "fsdp": "FSDP: wait for a collective, copy out",
          "step": "optimiser step", "all_gather": "all-gather of a block's parameters",
          "reduce_scatter": "reduce-scatter of a block's gradients"}


def merged(items, gap):
    """`items` (span, key, text) with the spans of one key that lie within `gap` ms of each other
    joined into one bar: ResNet-50's backward is a thousand nodes, too many to draw one by one."""
    out = []
    for span, key, text in sorted(items, key=lambda i: i[0]["start"]):
        if out and out[-1][1] == key and span["start"] - out[-1][0]["end"] <= gap:
            last = out[-1][0]
            out[-1] = (dict(last, end=max(last["end"], span["end"])), key, None)
        else:
            out.append((dict(span), key, text))
    return out


def main(trace, out):
    spans = tracefile.spans(trace)
    window = steps.typical_step(spans, pid=0)
    ranks = sorted({s["pid"] for s in spans})
    rows = []
    for rank in ranks:
        step = steps.within(spans, window, pid=rank)
        main = [s for s in step if s["thread"] == "main"]
        # The units' forward: the module spans one level inside the model's own.
        modules = [s for s in main if s["cat"] == "module"]
        model = tracefile.outermost(modules)
        blocks = tracefile.outermost([s for s in modules if s not in model])
        items = [(s, "forward", None) for s in blocks]
        items += [(s, "backward", None) for s in main if s["cat"] == "autograd" and s["name"] != "backward"]
        items += [(s, "fsdp", None) for s in main if s["cat"] == "fsdp" and s["name"].startswith("FSDP: wait")]
        items += [(s, "step", None) for s in main if s["cat"] == "optim"]
        worker = [s for s in step if s["thread"] == "MPI worker"]
        comm = [(s, "all_gather", None) for s in worker if s["name"].startswith("all_gather")]
        comm += [(s, "reduce_scatter", None) for s in worker if s["name"].startswith("reduce_scatter")]
        gap = 0.002 * (window[1] - window[0])
        rows.append(("rank %d: main thread" % rank, merged(items, gap)))
        rows.append(("rank %d: MPI worker" % rank, comm))
        print("rank %d: %d all-gathers, %d reduce-scatters in a step of %.0f ms" % (
            rank, sum(1 for _, k, _ in comm if k == "all_gather"), sum(1 for _, k, _ in comm if k == "reduce_scatter"),
            window[1] - window[0]))
    fig = figstyle.figure(6.4, 0.55 * len(rows) + 1.6)
    ax = fig.add_subplot()
    ax.set_xlim(0, window[1] - window[0])
    used = timeline.draw(ax, rows, window[0])
    ax.set_ylim(len(rows) - 0.25, -0.6)
    ax.legend([Patch(color=figstyle.COLOURS[k]) for k in used], [LABELS[k] for k in used], frameon=False,
              loc="upper center", bbox_to_anchor=(0.4, -0.2), ncol=2, fontsize=9)
    ax.set_title("Chapter 8: one FSDP step of ResNet-50 on %d ranks (CPU, MPI)" % len(ranks))
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
