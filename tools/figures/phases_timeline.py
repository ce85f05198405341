"""Chapter 3: one DataParallel training step on a timeline, read from --trace: scatter,
replicate, each replica's forward on its own thread, gather, backward with its reduce nodes (ticks), step.
Usage: phases_timeline.py TRACE.json OUT.svg  (from chapter3 --max-steps N --trace TRACE.json)"""
import sys

import figstyle
import steps
import timeline
import tracefile

LABELS = {"scatter": "scatter", "replicate": "replicate", "forward": "a replica's forward", "gather": "gather",
          "backward": "backward", "step": "optimiser step"}


def main(trace, out):
    spans = tracefile.spans(trace)
    window = steps.typical_step(spans)
    step = steps.within(spans, window)
    phases = [(s, s["name"], s["name"]) for s in step if s["cat"] == "parallel" and s["name"] != "parallel_apply"]
    phases += [(s, "backward", "backward") for s in step if s["cat"] == "autograd" and s["name"] == "backward"]
    phases += [(s, "step", None) for s in step if s["cat"] == "optim"]
    replica_rows = []
    for thread in ["main"] + sorted({s["thread"] for s in step if s["thread"].startswith("replica")}):
        forwards = [(s, "forward", "forward") for s in tracefile.outermost(
            [s for s in step if s["thread"] == thread and s["cat"] == "module" and s["name"] != "DataParallel.forward"])]
        replica_rows.append(("replica 0 (main thread)" if thread == "main" else thread, forwards))
    rows = [("DataParallel (main thread)", phases)] + replica_rows + [("reduce nodes (ticks)", [])]
    # The reduce nodes (replicate's backward: the replicas' gradients summed onto the model's
    # device) can be too short to see as bars: each is a tick at its start.
    reduces = [s["start"] - window[0] for s in step if s["cat"] == "autograd" and s["name"] == "BroadcastBackward"]
    fig = figstyle.figure(7.0, 0.45 * len(rows) + 1.0)
    ax = fig.add_subplot()
    ax.set_xlim(0, window[1] - window[0])
    used = timeline.draw(ax, rows, window[0])
    ax.plot(reduces, [len(rows) - 1] * len(reduces), "|", color=figstyle.COLOURS["reduce"], markersize=14)
    timeline.legend(ax, used, LABELS)
    ax.set_title("Chapter 3: one DataParallel step, %d replicas on the CPU (CNN, batch 64)" % len(replica_rows))
    figstyle.save(fig, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
